"""Request bodies: parsed, validated against the route's JSON Schema, errors named by path."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from jsonschema import Draft202012Validator, ValidationError

from bot.api.routing import route_of
from engine.domain.errors import InvalidRequest
from engine.domain.json_input import parse_json

# Per route schema: its validator, and whether the schema is flat (``_flat``).
_CHECKERS: dict[int, tuple[Draft202012Validator, bool]] = {}
_LONG = 64 * 1024  # bytes of JSON read in a thread rather than on the event loop
# Bytes of JSON checked on the event loop against a flat schema (``_flat``): such a body is
# checked in tens of microseconds, and the hop to a thread cost more than the check (8% of
# the event loop under 64 requests in flight, py-spy on ``signoff serve``). Longer bodies,
# and any body for a schema of nested objects (a stored workflow: 6 ms for 3 KiB), are
# checked in a thread.
_SHORT = 4 * 1024
# Short bodies a flat schema passed, by schema and bytes (the same bytes pass the same schema
# again): a decision's body is most often the same few bytes, ``{"release": true}``, and
# jsonschema took 8% of the server's CPU under a burst of 64 decisions in flight. Oldest out.
_PASSED: dict[tuple[int, bytes], None] = {}
_PASSED_SIZE = 512


async def read_body(request: web.Request) -> dict[str, Any]:
    """The JSON object in the body, valid against the route's schema (an empty body is ``{}``)."""
    raw = await request.read()
    if not raw.strip():
        body: Any = {}
    else:
        # Bounded: NaN, Infinity, huge integers, deep nesting and NUL are refused (400). Off the
        # event loop when long: the checking reader takes about 1 s per MiB of tiny values.
        if len(raw) > _LONG:
            body = await asyncio.to_thread(parse_json, raw, "the body")
        else:
            body = parse_json(raw, "the body")
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    route = route_of(request)
    if route is not None and route.body is not None:
        checker = _CHECKERS.get(id(route.body))
        if checker is None:
            checker = _CHECKERS[id(route.body)] = (
                Draft202012Validator(route.body),
                _flat(route.body),
            )
        validator, flat = checker
        # Off the event loop unless short and flat: a stored workflow's schema is checked node
        # by node in Python (up to a second for the largest body the schema allows), and
        # /healthz must not wait.
        if flat and len(raw) <= _SHORT:
            problems = [] if (id(route.body), raw) in _PASSED else _problems(validator, body)
            if not problems:
                _passed((id(route.body), raw))
        else:
            problems = await asyncio.to_thread(_problems, validator, body)
        if problems:
            lines = [f"{_path(err.absolute_path)}: {_message(err)}" for err in problems]
            raise InvalidRequest("; ".join(lines), problems=lines, field=_field(problems[0]))
        whole_numbers(route.body, body)
    return body


def _passed(key: tuple[int, bytes]) -> None:
    _PASSED.pop(key, None)
    if len(_PASSED) >= _PASSED_SIZE:
        del _PASSED[next(iter(_PASSED))]
    _PASSED[key] = None  # newest last


def _flat(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` describes an object of plain values: no choice between shapes and no
    objects described inside (free-form values, a run's ``input``, are plain to the checker)."""
    if any(key in schema for key in ("oneOf", "anyOf", "allOf", "if", "$ref", "items")):
        return False
    return all(
        not isinstance(sub, dict) or ("properties" not in sub and _flat(sub))
        for sub in schema.get("properties", {}).values()
    )


# Keywords that bound a size: once one fails, the rest of that value is not looked at (a list
# of 100,000 nodes is refused for its length, not checked node by node first).
_SIZES = frozenset({"maxItems", "maxProperties", "maxLength"})


def _problems(validator: Draft202012Validator, body: dict[str, Any]) -> list[ValidationError]:
    """The first ten problems in the order jsonschema finds them, sorted by path; none after a
    size bound fails (the schemas put ``maxItems`` before ``items``)."""
    found: list[ValidationError] = []
    for err in validator.iter_errors(body):
        found.append(err)
        if len(found) == 10 or err.validator in _SIZES:
            break
    return sorted(found, key=lambda err: list(err.absolute_path))


def whole_numbers(schema: Any, value: Any) -> Any:
    """JSON Schema counts ``2.0`` as an integer, so the handlers get ``2`` for it wherever the
    schema says integer, at any depth (a node's ``timeoutMinutes`` too): what the schema
    accepts, the server accepts (the engine checks ``isinstance(value, int)``). Free-form values
    (a run's ``input``, a node's ``args``) are left as they came."""
    if not isinstance(schema, dict):
        return value
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "integer" in kinds and isinstance(value, float) and value.is_integer():
        return int(value)
    for part in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(part, ()):
            value = whole_numbers(sub, value)
    if isinstance(value, dict):
        for name, prop in schema.get("properties", {}).items():
            if name in value:
                value[name] = whole_numbers(prop, value[name])
    elif isinstance(value, list) and "items" in schema:
        value[:] = [whole_numbers(schema["items"], item) for item in value]
    return value


def _field(err: ValidationError) -> str | None:
    """The top-level property a problem is about (a missing one too), for ``field``."""
    if err.absolute_path:
        return str(err.absolute_path[0])
    if err.validator == "required" and isinstance(err.instance, dict):
        missing = [name for name in err.validator_value if name not in err.instance]
        return str(missing[0]) if missing else None
    if err.validator == "not" and err.validator_value == {"required": ["key"]}:
        return "key"
    return None


def _message(err: ValidationError) -> str:
    """jsonschema's words, except where they name no field."""
    alternatives = err.validator_value if err.validator == "anyOf" else None
    if isinstance(alternatives, list) and all(set(a) == {"required"} for a in alternatives):
        names = ", ".join(name for a in alternatives for name in a["required"])
        return f"name at least one of {names}"
    if err.validator == "not" and isinstance(err.validator_value, dict):
        names = ", ".join(err.validator_value.get("required", []))
        return f"{names} is not accepted here" if names else err.message
    return str(err.message)


def _path(parts: Any) -> str:
    out = "body"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def query_int(request: web.Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequest(f"query.{name}: must be a whole number, got {raw!r}") from None
    if not lo <= value <= hi:
        raise InvalidRequest(f"query.{name}: must be {lo}..{hi}, got {value}")
    return value
