"""People away and their delegates: ``/v1/people/{name}/away`` (a person their own, an admin
anyone's) and ``/v1/away`` (every absence in force, admins only). Each handler is one call of
``engine.services.delegations``; the rules are ``engine.domain.delegation``'s."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.api.auth import principal
from bot.api.bodies import read_body
from bot.api.errors import json_response
from bot.api.routing import RouteTable, obj
from bot.api.views import iso
from bot.keys import ENGINE
from engine.domain.delegation import MAX_UNTIL_TEXT, Absence, parse_until
from engine.domain.model import Role

routes = RouteTable("people")
PERSON = (Role.APPROVER,)  # and admins; the person's own, unless an admin

_NAME = {"type": "string", "minLength": 1, "maxLength": 200}
_TIME = {"type": "string", "format": "date-time"}
_ABSENCE = obj(
    {"person": _NAME, "delegate": _NAME, "until": _TIME, "setBy": _NAME, "setAt": _TIME},
    ("person", "delegate", "until", "setBy", "setAt"),
)
_ONE = obj({"person": _NAME, "away": {"anyOf": [_ABSENCE, {"type": "null"}]}}, ("person", "away"))
_ENDED = obj(
    {
        "person": _NAME,
        "away": {"type": "null"},
        "ended": {"anyOf": [_ABSENCE, {"type": "null"}]},
    },
    ("person", "away", "ended"),
)
_PUT_BODY = obj(
    {
        "until": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_UNTIL_TEXT,
            "description": "a date (2026-12-24: back that day, 00:00 UTC) or an ISO 8601 time; "
            "in the future, at most a year ahead",
        },
        "delegate": {**_NAME, "description": "the person (of people:) who decides meanwhile"},
    },
    ("until", "delegate"),
)
_REFUSED = {
    401: "no valid token",
    400: "a body its schema refuses",
    422: "an until that is no time, past or over a year ahead; an unknown delegate",
    403: "not the person themselves nor an admin",
    404: "no such person",
}

_NOT_YOURS = {code: _REFUSED[code] for code in (401, 403, 404)}


def absence_json(absence: Absence | None) -> dict[str, Any] | None:
    """``absence`` as the API shows it: the audit log's fields, times as the API writes them."""
    if absence is None:
        return None
    return {**absence.as_json(), "until": iso(absence.until), "setAt": iso(absence.set_at)}


@routes.put(
    "/v1/people/{name}/away",
    summary="Be away until a time; a delegate decides for you meanwhile",
    roles=PERSON,
    body=_PUT_BODY,
    responses={200: "the absence in force", **_REFUSED},
    result=_ONE,
)
async def set_away(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    body = await read_body(request)
    until = parse_until(body["until"])
    absence = await request.app[ENGINE].delegations.set_away(
        principal(request), name, until, body["delegate"]
    )
    return json_response({"person": name, "away": absence_json(absence)})


@routes.get(
    "/v1/people/{name}/away",
    summary="Whether someone is away, until when, and who decides for them",
    roles=PERSON,
    responses={200: "the absence in force, or null", **_NOT_YOURS},
    result=_ONE,
)
async def get_away(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    absence = await request.app[ENGINE].delegations.away(principal(request), name)
    return json_response({"person": name, "away": absence_json(absence)})


@routes.delete(
    "/v1/people/{name}/away",
    summary="End an absence now: requests go to the person again",
    roles=PERSON,
    responses={200: "the absence ended, or null", **_NOT_YOURS},
    result=_ENDED,
)
async def end_away(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    ended = await request.app[ENGINE].delegations.end_away(principal(request), name)
    return json_response({"person": name, "away": None, "ended": absence_json(ended)})


@routes.get(
    "/v1/away",
    summary="Every absence in force, with its delegate",
    roles=(Role.ADMIN,),
    responses={200: "the absences, by person", 401: _REFUSED[401], 403: "not an admin"},
    result=obj({"away": {"type": "array", "items": _ABSENCE}}, ("away",)),
)
async def list_away(request: web.Request) -> web.Response:
    found = await request.app[ENGINE].delegations.current(principal(request))
    return json_response({"away": [absence_json(a) for a in found]})
