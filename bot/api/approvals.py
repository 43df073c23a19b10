"""``GET /v1/approvals``: the operator's queue as an API, across runs, a page at a time (the
console's queue page reads the same ``engine.services.approval_queue.approval_queue``)."""

from __future__ import annotations

from typing import TypeVar

from aiohttp import web

from bot.api.auth import principal
from bot.api.bodies import query_int
from bot.api.routing import RouteTable, obj
from bot.api.views import approval_entry_json, ref
from bot.keys import CONFIG, ENGINE
from engine.domain.errors import InvalidRequest
from engine.domain.json_input import check_text
from engine.domain.model import Role, TakeoverKind, TakeoverStatus
from engine.services.approval_queue import (
    CURSOR_PATTERN,
    DEFAULT_PAGE,
    MAX_PAGE,
    QueueFilter,
)

routes = RouteTable("approvals")
E = TypeVar("E", TakeoverKind, TakeoverStatus)

_NAME = {"type": "string", "minLength": 1, "maxLength": 200}
QUERY = {
    "status": {
        "type": "string",
        "enum": [s.value for s in TakeoverStatus],
        "default": TakeoverStatus.PENDING.value,
    },
    "approver": {
        **_NAME,
        "description": "a person, or `me` (the caller's person); requests that name no "
        "approvers are in everyone's queue",
    },
    "workflow": _NAME,
    "connector": _NAME,
    "channel": _NAME,
    "kind": {"type": "string", "enum": [k.value for k in TakeoverKind]},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": DEFAULT_PAGE},
    "cursor": {
        "type": "string",
        "pattern": CURSOR_PATTERN,
        "description": "a page's nextCursor",
    },
}


@routes.get(
    "/v1/approvals",
    summary="Approvals across runs (approval nodes, gate diversions, held calls, takeovers), "
    "oldest first, a page at a time",
    roles=(Role.APPROVER,),
    query=QUERY,
    responses={200: "one page", 400: "bad query", 401: "no or bad token", 403: "wrong role"},
    result=obj(
        {
            "approvals": {"type": "array", "items": ref("Approval")},
            "nextCursor": {"type": ["string", "null"]},
        },
        ("approvals", "nextCursor"),
    ),
)
async def list_approvals(request: web.Request) -> web.Response:
    unknown = sorted(set(request.query) - set(QUERY))
    if unknown:
        raise InvalidRequest(f"query.{unknown[0]}: unknown parameter (known: {', '.join(QUERY)})")
    approver = _text(request, "approver")
    if approver == "me":
        who = principal(request)
        if who.person is None:
            raise InvalidRequest("query.approver: `me` needs a token that belongs to a person")
        approver = who.person
    where = QueueFilter(
        workflow=_text(request, "workflow"),
        channel=_text(request, "channel"),
        approver=approver,
        connector=_text(request, "connector"),
        kind=_choice(request, "kind", TakeoverKind),
        status=_choice(request, "status", TakeoverStatus) or TakeoverStatus.PENDING,
    )
    page = await request.app[ENGINE].queries.approval_queue(
        where,
        limit=query_int(request, "limit", DEFAULT_PAGE, 1, MAX_PAGE),
        cursor=_text(request, "cursor", 400),
    )
    public = request.app[CONFIG].server.public_url
    return web.json_response(
        {
            "approvals": [
                approval_entry_json(e.request, e.run, e.workflow, public) for e in page.entries
            ],
            "nextCursor": page.next_cursor,
        }
    )


def _text(request: web.Request, name: str, limit: int = 200) -> str | None:
    values = request.query.getall(name, [])
    if len(values) > 1:
        raise InvalidRequest(f"query.{name}: give it once")
    if not values:
        return None
    value = values[0]
    if not value or len(value) > limit:
        raise InvalidRequest(f"query.{name}: must be 1..{limit} characters")
    return check_text(value, f"query.{name}")


def _choice(request: web.Request, name: str, kind: type[E]) -> E | None:
    value = _text(request, name)
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        raise InvalidRequest(
            f"query.{name}: must be one of {', '.join(v.value for v in kind)}, got {value!r}"
        ) from None
