"""Runs, their journal, the takeover API (the seed paths), workflows and the demo ledger."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.api.auth import principal
from bot.api.bodies import query_int, read_body
from bot.api.errors import json_response
from bot.api.routing import AGENT_FIELD, NOTES, STR, RouteTable, obj
from bot.api.views import journal_json, list_of, ref, run_json, takeover_json
from bot.keys import CONFIG, ENGINE
from engine.assembly import Engine
from engine.config.workflow_schema import WORKFLOW_BODY
from engine.domain.errors import NotFound
from engine.domain.model import Role, RunStatus, TakeoverRequest

routes = RouteTable("runs")
ANY = (Role.AGENT, Role.APPROVER)
DECIDERS = (Role.APPROVER,)
ADMIN = (Role.ADMIN,)

_RUN_RESPONSES = {401: "no or bad token", 403: "wrong role", 404: "no such run"}


def _engine(request: web.Request) -> Engine:
    return request.app[ENGINE]


def _public_url(request: web.Request) -> str:
    return request.app[CONFIG].server.public_url


@routes.post(
    "/v1/runs",
    summary="Start a run of a workflow (the same idempotencyKey returns the same run)",
    roles=(Role.AGENT,),
    body=obj(
        {
            "workflow": {"type": "string", "minLength": 1, "maxLength": 200},
            "input": {"type": "object"},
            "idempotencyKey": {"type": "string", "minLength": 1, "maxLength": 200},
            "agent": AGENT_FIELD,
        },
        ("workflow",),
    ),
    responses={
        201: "run created",
        200: "existing run for this idempotency key",
        400: "bad body",
        401: "no or bad token",
        403: "wrong role, or agent names another agent than the token's",
        404: "no such workflow",
    },
    result=ref("Run"),
)
async def start_run(request: web.Request) -> web.Response:
    body = await read_body(request)
    run, created = await _engine(request).runs.start_run(
        body["workflow"],
        body.get("input", {}),
        principal(request),
        idempotency_key=body.get("idempotencyKey"),
        agent=body.get("agent"),
    )
    return json_response(run_json(run), status=201 if created else 200)


@routes.get(
    "/v1/runs",
    summary="List runs, newest first",
    roles=ANY,
    query={
        "status": {"type": "string", "enum": [s.value for s in RunStatus]},
        "workflow": STR,
        "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
    },
    responses={200: "runs", 400: "bad query", 401: "no or bad token"},
    result=list_of("runs", "Run"),
)
async def list_runs(request: web.Request) -> web.Response:
    status_raw = request.query.get("status")
    status = None
    if status_raw is not None:
        try:
            status = RunStatus(status_raw)
        except ValueError:
            from engine.domain.errors import InvalidRequest

            raise InvalidRequest(
                f"query.status: must be one of {', '.join(s.value for s in RunStatus)}"
            ) from None
    runs = await _engine(request).queries.list_runs(
        status=status,
        workflow=request.query.get("workflow"),
        limit=query_int(request, "limit", 100, 1, 1000),
    )
    return json_response({"runs": [run_json(r) for r in runs]})


@routes.get(
    "/v1/runs/{id}",
    summary="One run",
    roles=ANY,
    responses={200: "run", **_RUN_RESPONSES},
    result=ref("Run"),
)
async def get_run(request: web.Request) -> web.Response:
    run = await _engine(request).queries.get_run(request.match_info["id"])
    return json_response(run_json(run))


@routes.get(
    "/v1/runs/{id}/journal",
    summary="The run's journal, in order",
    roles=ANY,
    responses={200: "journal", **_RUN_RESPONSES},
    result=list_of("events", "JournalEntry", runId={"type": "string"}),
)
async def get_journal(request: web.Request) -> web.Response:
    engine = _engine(request)
    run = await engine.queries.get_run(request.match_info["id"])
    entries = await engine.queries.journal(run.id)
    return json_response({"runId": run.id, "events": [journal_json(e) for e in entries]})


@routes.post(
    "/v1/runs/{id}/cancel",
    summary="Cancel a run, its open takeover requests and its unfinished child runs",
    roles=ADMIN,
    responses={200: "cancelled", 409: "the run has already ended", **_RUN_RESPONSES},
    result=ref("Run"),
)
async def cancel_run(request: web.Request) -> web.Response:
    engine = _engine(request)
    await engine.approvals.cancel_run(request.match_info["id"], principal(request))
    run = await engine.queries.get_run(request.match_info["id"])
    return json_response(run_json(run))


# -- the takeover API ------------------------------------------------------------------------

_TK_RESPONSES = {
    400: "bad body",
    401: "no or bad token",
    403: "not allowed to decide this request",
    404: "no such run or request",
    409: "already decided (status says what happened)",
}


async def _request_of_run(request: web.Request) -> TakeoverRequest:
    found = await _engine(request).queries.get_takeover(request.match_info["tkId"])
    if found.run_id != request.match_info["id"]:
        raise NotFound("no such takeover request on this run")
    return found


def _tk(request: web.Request, found: TakeoverRequest, status: int = 200) -> web.Response:
    return json_response(takeover_json(found, _public_url(request)), status=status)


@routes.post(
    "/v1/runs/{id}/takeover/request",
    summary="Take over a queued or running run: it parks before stepId (a step not started "
    "yet), or without it before the first step not yet started (the answer's stepId names it; "
    "null when no step is left)",
    roles=DECIDERS,
    body=obj(
        {
            "reason": {"type": "string", "minLength": 1, "maxLength": 2000},
            "stepId": STR,
            "timeoutMinutes": {"type": "integer", "minimum": 1, "maximum": 1440},
            "channels": {"type": "array", "items": STR, "maxItems": 20},
            "approvers": {"type": "array", "items": STR, "maxItems": 100},
        },
        ("reason",),
    ),
    responses={201: "request created", **_TK_RESPONSES},
    result=ref("TakeoverRequest"),
)
async def request_takeover(request: web.Request) -> web.Response:
    body = await read_body(request)
    engine = _engine(request)
    created = await engine.approvals.request(
        request.match_info["id"],
        principal(request),
        reason=body["reason"],
        step_id=body.get("stepId"),
        timeout_minutes=body.get("timeoutMinutes", 30),
        channels=body.get("channels", ()),
        approvers=engine.config.expand_people(body.get("approvers", ())),
    )
    return _tk(request, created, 201)


@routes.get(
    "/v1/runs/{id}/takeover",
    summary="The run's takeover requests",
    roles=ANY,
    responses={200: "requests", **_RUN_RESPONSES},
    result=list_of("requests", "TakeoverRequest"),
)
async def list_takeovers(request: web.Request) -> web.Response:
    engine = _engine(request)
    run = await engine.queries.get_run(request.match_info["id"])
    found = await engine.queries.list_takeovers(run_id=run.id)
    public = _public_url(request)
    return json_response({"requests": [takeover_json(r, public) for r in found]})


@routes.post(
    "/v1/runs/{id}/takeover/{tkId}/grant",
    summary="Grant (approve or take over); release: true also hands the run back",
    roles=DECIDERS,
    body=obj(
        {
            "notes": NOTES,
            "sdpOffer": {"type": "string", "maxLength": 65536},
            "release": {"type": "boolean"},
        }
    ),
    responses={200: "granted", **_TK_RESPONSES},
    result=ref("TakeoverRequest"),
)
async def grant(request: web.Request) -> web.Response:
    body = await read_body(request)
    after = await _engine(request).approvals.grant(
        request.match_info["tkId"],
        principal(request),
        notes=body.get("notes"),
        sdp_offer=body.get("sdpOffer"),
        release=bool(body.get("release", False)),
        run_id=request.match_info["id"],
    )
    return _tk(request, after)


@routes.post(
    "/v1/runs/{id}/takeover/{tkId}/deny",
    summary="Deny: the run follows onDeny, or the step and the run fail",
    roles=DECIDERS,
    body=obj({"notes": NOTES}),
    responses={200: "denied", **_TK_RESPONSES},
    result=ref("TakeoverRequest"),
)
async def deny(request: web.Request) -> web.Response:
    body = await read_body(request)
    after = await _engine(request).approvals.deny(
        request.match_info["tkId"],
        principal(request),
        notes=body.get("notes"),
        run_id=request.match_info["id"],
    )
    return _tk(request, after)


@routes.post(
    "/v1/runs/{id}/takeover/{tkId}/answer",
    summary="Store the browser's SDP answer for a live takeover session",
    roles=DECIDERS,
    body=obj({"sdpAnswer": {"type": "string", "minLength": 1, "maxLength": 65536}}, ("sdpAnswer",)),
    responses={200: "stored", **_TK_RESPONSES},
    result=ref("TakeoverRequest"),
)
async def answer(request: web.Request) -> web.Response:
    body = await read_body(request)
    found = await _request_of_run(request)
    after = await _engine(request).approvals.answer(found.id, principal(request), body["sdpAnswer"])
    return _tk(request, after)


@routes.post(
    "/v1/runs/{id}/takeover/{tkId}/release",
    summary="Release a granted request: the run is re-queued and resumes at the approval",
    roles=DECIDERS,
    body=obj({}),
    responses={200: "released", **_TK_RESPONSES},
    result=ref("TakeoverRequest"),
)
async def release(request: web.Request) -> web.Response:
    await read_body(request)
    after = await _engine(request).approvals.release(
        request.match_info["tkId"], principal(request), run_id=request.match_info["id"]
    )
    return _tk(request, after)


# -- workflows and the ledger ----------------------------------------------------------------


@routes.post(
    "/v1/workflows",
    summary="Store a workflow ({name, nodes}); every replica sees it",
    roles=ADMIN,
    # Node shapes by type, patterns and bounds: the body is checked against this schema first.
    body=WORKFLOW_BODY,
    responses={
        201: "created",
        200: "replaced",
        400: "the body breaks this schema",
        # A schema-valid workflow may still be refused: by what no JSON Schema can say.
        422: "invalid_config (problems lists each): duplicate ids, next or onDeny naming no "
        "node, a cycle, remindBeforeMinutes or escalateAfterMinutes not below timeoutMinutes, "
        "approvalsRequired above the approvers, a template that does not parse, or a "
        "connector, action, person, group, channel target or workflow the configuration does not "
        "know",
        401: "no or bad token",
        403: "wrong role",
        409: "name used by app.yaml",
    },
)
async def put_workflow(request: web.Request) -> web.Response:
    body = await read_body(request)
    stored = _engine(request).stored_workflows
    definition, created = await stored.put(body["name"], body["nodes"], principal(request).name)
    return json_response(definition, status=201 if created else 200)


@routes.get(
    "/v1/workflows",
    summary="Every workflow",
    roles=ANY,
    responses={200: "workflows", 401: "no or bad token"},
)
async def list_workflows(request: web.Request) -> web.Response:
    engine = _engine(request)
    workflows = await engine.workflows.all()
    stored = await engine.stored_workflows.definitions()
    out: list[dict[str, Any]] = [
        {
            "name": wf.name,
            "source": "app.yaml" if name in engine.config.workflows else "api",
            "nodes": [{"id": n.id, "type": n.type.value} for n in wf.nodes],
            **({"definition": stored[name]} if name in stored else {}),
        }
        for name, wf in sorted(workflows.items())
    ]
    return json_response({"workflows": out})


@routes.get(
    "/v1/ledger",
    summary="The demo ledger: every demo-ledger call (action, args, idempotency key, time)",
    roles=ADMIN,
    query={"runId": STR, "limit": {"type": "integer", "minimum": 1, "maximum": 10000}},
    responses={200: "entries", 400: "bad query", 401: "no or bad token", 403: "wrong role"},
)
async def ledger(request: web.Request) -> web.Response:
    rows = await _engine(request).queries.ledger(
        run_id=request.query.get("runId"), limit=query_int(request, "limit", 1000, 1, 10000)
    )
    entries = [
        {
            "id": r["id"],
            "connector": r["connector"],
            "action": r["action"],
            "args": r["args"],
            "idempotencyKey": r["idempotency_key"],
            "runId": r["run_id"],
            "stepId": r["step_id"],
            "at": r["at"].isoformat().replace("+00:00", "Z"),
        }
        for r in rows
    ]
    return json_response({"entries": entries})
