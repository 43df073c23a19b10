"""JSON that arrives from outside, parsed with bounds: the one parser for every front end.

Python's ``json`` module accepts what no other JSON reader does and what the databases refuse:
``NaN`` and ``Infinity`` (invalid JSON on the way out, an error on PostgreSQL), ``1e400`` (read as
infinity), integers of any length (past 4,300 digits ``int()`` raises), nesting as deep as the
C stack allows (then ``RecursionError``), ``\\u0000`` (PostgreSQL's text and JSONB refuse it) and
lone surrogates (``"\\ud800"`` cannot be encoded as UTF-8). Each is refused here as
``InvalidRequest`` naming where it was found, before anything is stored.

    parse_json(raw, what)    bytes or text -> value, or InvalidRequest
    check_value(value, what) a value parsed elsewhere (a platform SDK's), the same checks
    check_text(text, what)   one string from a path, a query or a header
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from engine.domain.errors import InvalidRequest

MAX_DEPTH = 64
# Integers beyond 64 bits lose precision in JavaScript clients and in most databases' JSON.
# The bound holds for every number, however written: JSON Schema (``/openapi.json``) cannot tell
# ``1e19`` from ``10000000000000000000``, so a schema that says "at most MAX_INT" is only true if
# the server refuses both.
MAX_INT = 2**63 - 1
_MAX_INT_DIGITS = len(str(MAX_INT)) + 1  # a sign and the digits: anything longer is too big
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")


def _parse_int(text: str) -> int:
    if len(text) > _MAX_INT_DIGITS or abs(value := int(text)) > MAX_INT:
        raise _Refused(f"an integer outside ±{MAX_INT} ({len(text)} characters)")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"a number too large to represent ({text[:40]})")
    if abs(value) > MAX_INT:
        raise _Refused(f"a number outside ±{MAX_INT} ({text[:40]})")
    return value


def _parse_constant(name: str) -> Any:
    raise _Refused(f"{name} (JSON has no non-finite numbers)")


class _Refused(ValueError):
    """Raised inside the decoder's hooks; turned into InvalidRequest with the location."""


_DECODER = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
)


def parse_json(raw: bytes | str, what: str = "the body") -> Any:
    """The value in ``raw``, or ``InvalidRequest`` saying why it is refused."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"{what} is not UTF-8: {exc}") from None
    try:
        value = _DECODER.decode(text)
    except _Refused as exc:
        raise InvalidRequest(f"{what} holds {exc}") from None
    except RecursionError:
        raise InvalidRequest(f"{what} is nested more than {MAX_DEPTH} levels deep") from None
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"{what} is not valid JSON: {exc}") from None
    check_value(value, what)
    return value


def check_value(value: Any, what: str = "the body") -> None:
    """Refuse a parsed value that is nested too deep, holds a non-finite or oversized number, a
    NUL character or a lone surrogate. Walks without recursion, so any depth is safe. The walk
    names no paths until it meets a problem: a path per value cost 0.6 s of a 1 MB body."""
    if not _has_problem(value):
        return
    stack: list[tuple[Any, int, str]] = [(value, 1, what)]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, str):
            _check_chars(item, where)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if abs(item) > MAX_INT:
                raise InvalidRequest(f"{where} is an integer outside ±{MAX_INT}")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidRequest(f"{where} is {item} (JSON has no non-finite numbers)")
            if abs(item) > MAX_INT:
                raise InvalidRequest(f"{where} is a number outside ±{MAX_INT}")
        elif isinstance(item, dict | list | tuple):
            if depth > MAX_DEPTH:
                raise InvalidRequest(f"{what} is nested more than {MAX_DEPTH} levels deep")
            if isinstance(item, dict):
                for key, child in item.items():
                    _check_chars(str(key), f"{where} (a key)")
                    stack.append((child, depth + 1, f"{where}.{key}"))
            else:
                stack.extend((child, depth + 1, f"{where}[{i}]") for i, child in enumerate(item))


def _has_problem(value: Any) -> bool:
    """Whether ``check_value`` would refuse ``value`` (the same rules, no paths)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _BAD_CHAR.search(item) is not None:
                return True
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if abs(item) > MAX_INT:
                return True
        elif isinstance(item, float):
            if not math.isfinite(item) or abs(item) > MAX_INT:
                return True
        elif isinstance(item, dict | list | tuple):
            if depth > MAX_DEPTH:
                return True
            if not item:
                continue
            if isinstance(item, dict):
                if any(_BAD_CHAR.search(str(key)) is not None for key in item):
                    return True
                item = item.values()
            stack.extend((child, depth + 1) for child in item)
    return False


def check_text(text: str, what: str) -> str:
    """``text`` unchanged, or ``InvalidRequest`` if it holds a NUL or a lone surrogate."""
    _check_chars(text, what)
    return text


def _check_chars(text: str, where: str) -> None:
    found = _BAD_CHAR.search(text)
    if found is not None:
        kind = "a NUL character" if found.group() == "\x00" else "a lone surrogate"
        raise InvalidRequest(f"{where[:200]} holds {kind}, which is not accepted")
