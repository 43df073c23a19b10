"""Held calls: ``POST /v1/calls`` (an agent asks for one connector action) and
``GET /v1/calls/{executionId}`` (where it stands, with an optional long poll).

The policy decides (``engine.domain.policy``); the engine stores and runs
(``engine.services.calls``). This module only translates: the HTTP status follows the call's
status, one table below.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.api.auth import principal
from bot.api.bodies import query_int, read_body
from bot.api.errors import json_response
from bot.api.routing import AGENT_FIELD, RouteTable, obj
from bot.api.views import approval_url, iso
from bot.keys import CONFIG, ENGINE
from engine.assembly import MAX_INPUT_BYTES
from engine.domain.binding import canonical_json
from engine.domain.call_workflow import APPROVE_ONLY, EXECUTE
from engine.domain.errors import InvalidRequest
from engine.domain.model import Role
from engine.services.calls import CallRequest, CallStatus, CallView

routes = RouteTable("calls")

DEFAULT_WAIT_SECONDS = 30  # how long POST waits for an allowed call to finish
MAX_WAIT_SECONDS = 60

HTTP_STATUS: dict[CallStatus, int] = {
    CallStatus.EXECUTED: 200,
    CallStatus.APPROVED: 200,
    CallStatus.PENDING_APPROVAL: 202,
    CallStatus.RUNNING: 202,
    CallStatus.BLOCKED: 403,
    CallStatus.FAILED: 502,
    # Only a repeated idempotencyKey can meet these on POST: the body says what happened.
    CallStatus.DENIED: 200,
    CallStatus.EXPIRED: 200,
    CallStatus.CANCELLED: 200,
}

_WAIT = {"wait": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS}}
_NAME = {"type": "string", "minLength": 1, "maxLength": 100}
_TEXT = {"type": "string", "maxLength": 200}


def call_json(view: CallView, public_url: str) -> dict[str, Any]:
    """A call as the API shows it: ``engine.domain.calls_view.CallView.as_json`` plus, for a held
    call, its approval link, summary and expiry."""
    out = view.as_json()
    if view.request is not None:
        out["requestId"] = view.request.id
        out["approvalUrl"] = approval_url(public_url, view.request.id)
        out["approvalSummary"] = view.request.details.get("summary")
        out["expiresAt"] = iso(view.request.expires_at)
    return out


def _respond(request: web.Request, view: CallView) -> web.Response:
    """The POST answer: a refusal or a failure also carries the API's ``{error, message}``."""
    body = call_json(view, request.app[CONFIG].server.public_url)
    if view.status == CallStatus.BLOCKED:
        del body["executionId"]
        body.pop("reason", None)
        body.update(error="blocked", message=view.reason, rule=view.rule)
    elif view.status == CallStatus.FAILED:
        body.update(error="call_failed", message=view.reason)
    return json_response(body, status=HTTP_STATUS[view.status])


@routes.post(
    "/v1/calls",
    summary=(
        "Ask for one connector action; the policy allows, holds or blocks it. mode "
        "approve_only records the approval and calls nothing (the caller runs the action). "
        "callbackUrl (http/https, called from the server) receives the outcome, signed with "
        "X-Signoff-Signature: t=<unix>,v1=<hex HMAC-SHA256 of '<t>.<body>'> keyed by "
        "server.secretKey. ?wait=N (0..60, default 30): how long an allowed call is waited for."
    ),
    roles=(Role.AGENT,),
    body=obj(
        {
            "connector": _NAME,
            "action": _NAME,
            "args": {"type": "object"},
            "account": _TEXT,
            "reason": {"type": "string", "maxLength": 2000},
            "agent": AGENT_FIELD,
            "session": _TEXT,
            "callbackUrl": {"type": "string", "minLength": 1, "maxLength": 2000},
            "mode": {"type": "string", "enum": [EXECUTE, APPROVE_ONLY]},
            "idempotencyKey": {"type": "string", "minLength": 1, "maxLength": 190},
        },
        ("connector", "action"),
    ),
    query=_WAIT,
    responses={
        200: "executed {status, executionId, result}; approve_only: approved {status, "
        "executionId, result: null}; a repeated idempotencyKey answers the call as it stands",
        202: "held {status: pending_approval, executionId, requestId, approvalUrl, "
        "approvalSummary, expiresAt} (nothing has run), or still running {status: running, "
        "executionId} after the wait",
        400: "bad body (or callbackUrl not http/https)",
        401: "no or bad token",
        403: "blocked {status: blocked, error: blocked, message, rule}; or wrong role; or only "
        "the agent's own session could approve; or agent names another agent than the token's",
        404: "no such connector or action",
        502: "the connector failed {status: failed, executionId, error: call_failed, message}",
    },
)
async def create_call(request: web.Request) -> web.Response:
    body = await read_body(request)
    args = body.get("args", {})
    if len(canonical_json(args).encode()) > MAX_INPUT_BYTES:
        raise InvalidRequest(f"body.args: at most {MAX_INPUT_BYTES} bytes of JSON")
    calls = request.app[ENGINE].calls
    view = await calls.submit(
        CallRequest(
            connector=body["connector"],
            action=body["action"],
            args=args,
            account=body.get("account"),
            reason=body.get("reason"),
            agent=body.get("agent"),
            session=body.get("session"),
            callback_url=body.get("callbackUrl"),
            mode=body.get("mode", EXECUTE),
            idempotency_key=body.get("idempotencyKey"),
        ),
        principal(request),
    )
    if view.status == CallStatus.RUNNING and view.execution_id is not None:
        seconds = query_int(request, "wait", DEFAULT_WAIT_SECONDS, 0, MAX_WAIT_SECONDS)
        # Until it has an outcome, or a confidence-gate diversion holds it after all.
        view = await calls.wait(view.execution_id, seconds)
    return _respond(request, view)


@routes.get(
    "/v1/calls/{executionId}",
    summary=(
        "Where a call stands: pending_approval, running, executed, approved, denied, expired, "
        "failed or cancelled, with result or reason. ?wait=N (0..60) long-polls: the answer "
        "comes when the status changes or after N seconds (the server re-reads the call about "
        "four times a second)."
    ),
    roles=(Role.AGENT, Role.APPROVER),
    query=_WAIT,
    responses={
        200: "{executionId, status, result | reason, decidedBy?, requestId?, approvalUrl?, "
        "approvalSummary?, expiresAt?}",
        400: "bad query",
        401: "no or bad token",
        404: "no such call",
    },
)
async def get_call(request: web.Request) -> web.Response:
    calls = request.app[ENGINE].calls
    seconds = query_int(request, "wait", 0, 0, MAX_WAIT_SECONDS)
    execution_id = request.match_info["executionId"]
    view = await calls.wait(execution_id, seconds) if seconds else await calls.view(execution_id)
    body = call_json(view, request.app[CONFIG].server.public_url)
    return json_response(body)
