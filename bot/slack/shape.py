"""The shape Slack's payloads must have before bolt sees them.

A correctly signed request can still carry a body bolt's matchers cannot read (an empty
``actions`` list, ``view: null``): that is bad input, answered 400 with nothing changed, not a
500 from inside bolt. The signature is checked first, so an unsigned body is still a 401.
JSON is read with ``engine.domain.json_input`` (NaN, huge numbers, deep nesting, NUL and lone
surrogates are refused), and so is every form field of a slash command.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs

from slack_sdk.signature import SignatureVerifier

from engine.domain.errors import InvalidRequest
from engine.domain.json_input import check_text, parse_json

_TIMESTAMP = re.compile(r"[0-9]{1,12}")  # seconds since 1970, ASCII digits only


def timestamp_problem(headers: Any) -> str | None:
    """Why ``X-Slack-Request-Timestamp`` cannot be a Slack timestamp, or None. slack_sdk's
    verifier calls ``int()`` on it, which raises for ``abc``, ``""`` or ``1e9`` (a 500) and
    accepts ``" 17"``, ``"1_7"`` or non-ASCII digits: only plain digits are let through."""
    stamp = headers.get("X-Slack-Request-Timestamp")
    if stamp is None or _TIMESTAMP.fullmatch(stamp):
        return None  # absent: bolt's own verification answers 401
    return "X-Slack-Request-Timestamp must be a whole number of seconds"


def signed(verifier: SignatureVerifier, body: bytes, headers: Any) -> bool:
    """Whether ``body`` carries a valid Slack signature (after ``timestamp_problem``)."""
    return verifier.is_valid_request(body.decode("utf-8", "replace"), dict(headers))


def shape_problem(body: bytes, content_type: str) -> str | None:
    """Why this (signed) body is not a payload Slack sends, or None."""
    text = body.decode("utf-8", "replace")
    if content_type.startswith("application/json"):
        try:
            event = parse_json(body, "the event")
        except InvalidRequest as exc:
            return exc.message
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return "an event needs a type"
        if event.get("event") is not None and not isinstance(event["event"], dict):
            return "event.event must be an object"
        authorizations = event.get("authorizations")
        if authorizations is not None and not (
            isinstance(authorizations, list) and all(isinstance(a, dict) for a in authorizations)
        ):
            return "event.authorizations must be a list of objects"
        return _fields(event, "event")
    form = parse_qs(text, keep_blank_values=True)
    try:
        for name, values in form.items():
            check_text(name, "a form field name")
            for value in values:
                check_text(value, f"form field {name[:50]}")
        if "payload" not in form:
            return None  # a slash command: bolt reads its fields leniently
        payload = parse_json(form["payload"][0], "payload")
    except InvalidRequest as exc:
        return exc.message
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        return "payload needs a type"
    problem = _fields(payload, "payload")
    if problem is not None:
        return problem
    kind = payload["type"]
    user = payload.get("user")
    if not (isinstance(user, dict) and isinstance(user.get("id"), str)):
        return "payload.user needs an id"
    if kind == "block_actions":
        actions = payload.get("actions")
        if not isinstance(actions, list) or not actions:
            return "block_actions needs actions"
        for action in actions:
            if not isinstance(action, dict) or not isinstance(action.get("action_id"), str):
                return "every action needs an action_id"
            if not isinstance(action.get("value", ""), str):
                return "an action's value is text"
    if kind in ("view_submission", "view_closed") and not isinstance(payload.get("view"), dict):
        return f"{kind} needs a view"
    return None


_OBJECTS = ("team", "enterprise", "user", "channel", "container", "view", "message", "state")
_TEXTS = ("token", "trigger_id", "response_url", "api_app_id", "team_id", "enterprise_id")


def _fields(body: dict[str, Any], where: str) -> str | None:
    """The fields bolt's middleware reads, in the types it reads them as."""
    for key in _OBJECTS:
        if body.get(key) is not None and not isinstance(body[key], dict):
            return f"{where}.{key} must be an object"
    for key in _TEXTS:
        if body.get(key) is not None and not isinstance(body[key], str):
            return f"{where}.{key} must be text"
    for key in ("team", "enterprise", "channel"):
        inner = body.get(key)
        if isinstance(inner, dict) and not isinstance(inner.get("id", ""), str):
            return f"{where}.{key}.id must be text"
    if body.get("is_enterprise_install") is not None and not isinstance(
        body["is_enterprise_install"], bool
    ):
        return f"{where}.is_enterprise_install must be a boolean"
    return None
