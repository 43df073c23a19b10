"""The confidence gate's API: its effective settings, admins' changes, and feedback on steps.
Each handler is one engine call (``engine.gate``); validation and auditing live there."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.api.auth import principal
from bot.api.bodies import read_body
from bot.api.errors import json_response
from bot.api.routing import STR, RouteTable, obj
from bot.api.views import iso
from bot.keys import ENGINE
from engine.domain.confidence import Estimator
from engine.domain.errors import InvalidRequest
from engine.domain.model import Role
from engine.gate import GateStatus
from engine.gate.settings import GATED_NODE_TYPES, SETTINGS, Scope

routes = RouteTable("gate")
ANY = (Role.AGENT, Role.APPROVER)

_NULLABLE_BOOL = {"type": ["boolean", "null"]}
# What engine.gate.settings.change accepts, so that /openapi.json promises no more: at least
# one setting; a global change has no key, a node_type change names a gated node type, an agent
# change names the agent.
_PATCH_BODY = obj(
    {
        "enabled": _NULLABLE_BOOL,
        "threshold": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "estimator": {"enum": [*(e.value for e in Estimator), None]},
        "samples": {"type": ["integer", "null"]},
        "calibrate": _NULLABLE_BOOL,
        "scope": {"type": "string", "enum": [s.value for s in Scope]},
        "key": {"type": "string", "minLength": 1, "maxLength": 200},
    }
)
_PATCH_BODY["anyOf"] = [{"required": [name]} for name in SETTINGS]
_PATCH_BODY["allOf"] = [
    {"if": {"properties": {"scope": {"const": "global"}}}, "then": {"not": {"required": ["key"]}}},
    {
        "if": {"properties": {"scope": {"const": "node_type"}}, "required": ["scope"]},
        "then": {"properties": {"key": {"enum": list(GATED_NODE_TYPES)}}, "required": ["key"]},
    },
    {
        "if": {"properties": {"scope": {"const": "agent"}}, "required": ["scope"]},
        "then": {"required": ["key"]},
    },
]


def status_json(status: GateStatus) -> dict[str, Any]:
    """Each effective value with its source, the overrides behind them, and warnings."""
    e = status.effective
    values = {
        "enabled": e.enabled,
        "threshold": e.threshold,
        "estimator": e.estimator.value,
        "samples": e.samples,
        "calibrate": e.calibrate,
    }
    return {
        "agent": status.agent,
        "nodeType": status.node_type,
        "settings": {
            name: {"value": value, "source": e.sources[name]} for name, value in values.items()
        },
        "channels": {"value": list(e.channels), "source": "app.yaml" if e.channels else "default"},
        "approvers": {
            "value": list(e.approvers),
            "source": "app.yaml" if e.approvers else "default",
        },
        "overrides": [
            {
                "scope": o.scope.value,
                "key": o.key or None,
                "setting": o.setting,
                "value": o.value,
                "source": o.source,
                "updatedBy": o.updated_by,
                "updatedAt": iso(o.updated_at),
            }
            for o in status.overrides
        ],
        "llmConfigured": status.llm_configured,
        "warnings": list(status.warnings),
    }


@routes.get(
    "/v1/gate",
    summary="The gate's effective settings, each with its source "
    "(default, app.yaml, env, override:global|node_type=<t>|agent=<name>)",
    roles=ANY,
    query={"agent": STR, "nodeType": {"type": "string", "enum": list(GATED_NODE_TYPES)}},
    responses={200: "settings", 400: "bad query", 401: "no or bad token"},
)
async def get_gate(request: web.Request) -> web.Response:
    node_type = request.query.get("nodeType")
    if node_type is not None and node_type not in GATED_NODE_TYPES:
        raise InvalidRequest(
            f"query.nodeType: must be one of {', '.join(GATED_NODE_TYPES)}", field="nodeType"
        )
    status = await request.app[ENGINE].gate.status(request.query.get("agent"), node_type)
    return json_response(status_json(status))


@routes.patch(
    "/v1/gate",
    summary="Change gate settings at one scope (null removes an override); audited",
    roles=(Role.ADMIN,),
    body=_PATCH_BODY,
    responses={
        200: "changed (changes lists what was stored; warnings any fallback)",
        400: "bad value (field names it)",
        401: "no or bad token",
        403: "not an admin",
    },
)
async def patch_gate(request: web.Request) -> web.Response:
    body = await read_body(request)
    gate = request.app[ENGINE].gate
    values = {name: body[name] for name in SETTINGS if name in body}
    result = await gate.settings.change(
        principal(request), values, body.get("scope", Scope.GLOBAL.value), body.get("key")
    )
    changes = [
        {
            "setting": c.setting,
            "scope": c.scope.value,
            "key": c.key or None,
            "old": c.old,
            "new": c.new,
        }
        for c in result.changes
    ]
    status = await gate.status()
    return json_response(
        {"changes": changes, "warnings": list(result.warnings), "gate": status_json(status)}
    )


@routes.post(
    "/v1/runs/{id}/feedback",
    summary=(
        "Rate a step of a run 1..5 (calibrates the gate); journaled as feedback_recorded. "
        "Only people rate: agent tokens and tokens without a person are refused (403)"
    ),
    roles=ANY,
    body=obj(
        {
            "stepId": {"type": "string", "minLength": 1, "maxLength": 200},
            "score": {"type": "integer", "minimum": 1, "maximum": 5},
            "comment": {"type": ["string", "null"], "maxLength": 4000},
        },
        ("stepId", "score"),
    ),
    responses={
        201: "recorded",
        400: "bad body (score outside 1..5)",
        401: "no or bad token",
        403: "an agent (or a token without a person): only people rate steps",
        404: "no such run, or no such step in it",
    },
)
async def record_feedback(request: web.Request) -> web.Response:
    body = await read_body(request)
    entry = await request.app[ENGINE].gate.record_feedback(
        request.match_info["id"],
        body["stepId"],
        body["score"],
        body.get("comment"),
        principal(request),
    )
    return json_response(
        {
            "runId": entry.run_id,
            "stepId": entry.step_id,
            "seq": entry.seq,
            "score": entry.data["score"],
            "comment": entry.data["comment"],
            "by": entry.data["by"],
            "at": iso(entry.at),
        },
        status=201,
    )
