"""What an operator, text method or filter would make, refused before it runs.

``engine/domain/expression_limits.py`` holds the limits and the budget; this module holds the
checks the sandbox (``engine/domain/expression_sandbox.py``) and the static scan of a template
(``engine/domain/expression_scan.py``) make on the arguments of one operation: ``'a' * 10**8``,
``'x'.center(10**9)``, ``'%*d' % (10**9, 1)``, ``range(10**9)``, ``lipsum(10**6)`` and the
filters that can make a value much larger than their input (``engine/domain/expression_calls.py``
says which filter is checked how).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Mapping
from typing import Any, TypeGuard

from engine.domain.expression_limits import (
    MAX_INT,
    MAX_OPERATIONS,
    MAX_SIZE,
    MAX_WIDTH,
    Exceeded,
    size,
    too_big,
)


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _sequence(value: Any) -> bool:
    return isinstance(value, str | bytes | list | tuple)


def check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse ``left <operator> right`` before computing it when its result would be past a
    limit (``'a' * 10**8``, ``[0] * 10**8``, ``10**100**100``)."""
    if operator == "*":
        if _int(left) and _int(right):
            if left.bit_length() + right.bit_length() > MAX_INT.bit_length() + 1:
                raise Exceeded(f"an integer beyond ±{MAX_INT:,}")
        elif _int(right) and _sequence(left):
            _repeat(left, right)
        elif _int(left) and _sequence(right):
            _repeat(right, left)
    elif operator == "**":
        if _int(left) and _int(right) and right > 0 and abs(left) > 1:
            if (abs(left).bit_length() - 1) * right > MAX_INT.bit_length():
                raise Exceeded(f"an integer beyond ±{MAX_INT:,}")
    elif operator == "+":
        if _sequence(left) and _sequence(right):
            total = _length(left) + _length(right)
            if total > MAX_SIZE:
                raise too_big(f"adding values of {total:,} characters")
    elif operator == "%" and isinstance(left, str):
        check_percent(left, right)


def _length(value: Any, limit: int = MAX_SIZE) -> int:
    """A text's characters; any other value's size."""
    return len(value) if isinstance(value, str | bytes) else size(value, limit)


def _repeat(sequence: Any, times: int) -> None:
    if times <= 1:
        return
    if _length(sequence, MAX_SIZE // times + 1) * times > MAX_SIZE:
        raise too_big(f"a value repeated {times:,} times")


# -- widths in formats, methods and filters ----------------------------------------------------

_PERCENT = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[#0 +\-]*(?P<width>\*|\d+)?(?:\.(?P<precision>\*|\d+))?"
    r"[hlL]?(?P<conversion>.)",
    re.DOTALL,
)
_DIGITS = re.compile(r"\d+")


def check_width(width: Any, what: str = "a width", most: int = MAX_WIDTH) -> int:
    """``width`` (a number of characters to pad to, or an indent) when it is within ``most``;
    what it adds to a text, at most (0 for what is not a number)."""
    if not _int(width):
        return 0
    if abs(width) > most:
        raise Exceeded(f"{what} of {width:,} (at most {most:,})")
    return abs(width)


def check_size(total: int, what: str) -> None:
    """Refuse a value predicted to be ``total`` characters long, past the size limit."""
    if total > MAX_SIZE:
        raise too_big(f"{what} of {total:,} characters")


def _numbers(text: str) -> Iterator[int]:
    for digits in _DIGITS.findall(text):
        yield MAX_SIZE + 1 if len(digits) > 4000 else int(digits)  # int() refuses 4,300


def shown(value: Any, conversion: str = "s") -> int:
    """About how many characters ``value`` takes when formatted (``%s``, ``{}``, ``~``): its
    length for a text (a ``repr`` escapes each character in at most 10), its JSON size for
    a list or mapping, the digits of a number."""
    if isinstance(value, str | bytes):
        return len(value) * (10 if conversion in ("r", "a") else 1)
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return value.bit_length() // 3 + 2
    if isinstance(value, float):
        return 330  # "%f" of 1e308: 309 digits
    if isinstance(value, list | tuple | set | frozenset | dict):
        return size(value, MAX_SIZE + 1)
    return 64


def _spec_widths(spec: str) -> int:
    """What the widths and precisions written in a format spec add, each checked."""
    return sum(check_width(number) for number in _numbers(spec))


def check_percent(text: str, values: Any) -> None:
    """``text % values``: no width or precision past ``MAX_WIDTH`` and no result past the size
    limit, counted spec by spec on the value each one takes, before it is formatted."""
    items = values if isinstance(values, tuple) else (values,)
    mapping = values if isinstance(values, Mapping) else None
    at, total = 0, len(text)
    for match in _PERCENT.finditer(text):
        if match["conversion"] == "%":
            continue
        for part in (match["width"], match["precision"]):
            if part == "*":
                total += check_width(items[at] if at < len(items) else None)
                at += 1
            elif part is not None:
                total += _spec_widths(part)
        if match["key"] is not None and mapping is not None:
            value = mapping.get(match["key"])
        else:
            value = items[at] if at < len(items) else None
            at += 1
        total += shown(value, match["conversion"])
        check_size(total, "a formatted text")


def check_braces(text: str, args: Any, kwargs: Any) -> None:
    """``text.format(...)``: no width or precision past ``MAX_WIDTH`` and no result past the
    size limit, counted field by field on the value each one shows, before it is formatted."""
    args, kwargs = tuple(args), dict(kwargs)
    auto, total = 0, 0
    for literal, field, spec, conversion in string.Formatter().parse(text):
        total += len(literal)
        if field is None:
            continue
        first = re.split(r"[.\[]", field, maxsplit=1)[0]
        if first == "":
            first, auto = str(auto), auto + 1
        if first.isdigit():
            value = args[int(first)] if int(first) < len(args) else None
        else:
            value = kwargs.get(first)
        total += shown(value, conversion or "s") + _spec_widths(spec or "")
        if spec and "{" in spec:  # a width taken from the arguments
            for _lit, inner, _spec, _conv in string.Formatter().parse(spec):
                auto += inner == ""
            total += sum(check_width(v) for v in (*args, *kwargs.values()))
        check_size(total, "a formatted text")


def estimate_replace(text: Any, old: Any, new: Any, count: Any) -> None:
    if not (isinstance(text, str) and isinstance(old, str) and isinstance(new, str)):
        return
    found = text.count(old) if old else len(text) + 1
    if _int(count) and count >= 0:
        found = min(found, count)
    total = len(text) + found * (len(new) - len(old))
    if total > MAX_SIZE:
        raise too_big(f"a replacement making {total:,} characters")


def estimate_join(separator: Any, items: list[Any]) -> None:
    total = len(separator) * max(len(items) - 1, 0)
    for item in items:  # texts and numbers (most joins) without size()'s walk
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 2
        else:
            total += _length(item)
        if total > MAX_SIZE:
            raise too_big(f"joining {len(items):,} items")


def check_method(
    text: str | bytes, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """A text method that can make a longer text (``'x'.center(10**9)``), before it runs."""
    if name in ("center", "ljust", "rjust", "zfill"):
        check_width(args[0] if args else kwargs.get("width"))
    elif name == "expandtabs":
        tabsize = args[0] if args else kwargs.get("tabsize", 8)
        if _int(tabsize):
            check_width(tabsize, "a tab size")
            tabs = text.count("\t") if isinstance(text, str) else text.count(b"\t")
            check_size(len(text) + tabs * tabsize, "a text with its tabs expanded")
    elif name == "replace":
        rest = list(args) + [kwargs.get("count", -1)] * (3 - len(args))
        estimate_replace(text, rest[0], rest[1], rest[2])
    elif name == "join" and args and isinstance(args[0], list):
        estimate_join(text, args[0])
    elif name == "translate" and args and isinstance(args[0], Mapping):
        longest = max((size(v) for v in args[0].values()), default=0)
        check_size(len(text) * longest, "a translated text")
    elif name in ("format", "format_map") and isinstance(text, str):
        check_braces(text, args, args[0] if name == "format_map" and args else kwargs)


def check_lipsum(n: Any = 5, html: Any = True, low: Any = 20, high: Any = 100) -> None:
    if _int(n) and _int(high) and n * high * 12 > MAX_SIZE:
        raise too_big(f"lipsum of {n:,} paragraphs of up to {high:,} words each")


def check_range(numbers: range) -> range:
    """``numbers`` when a loop over them fits in the operations limit."""
    try:
        length = len(numbers)
    except OverflowError:  # more than sys.maxsize
        length = abs(numbers.stop - numbers.start) // abs(numbers.step)
    if length > MAX_OPERATIONS:
        raise Exceeded(f"a range of {length:,} numbers (at most {MAX_OPERATIONS:,})")
    return numbers
