"""What an operator, text method or filter would make, refused before it runs.

``engine/domain/expression_limits.py`` holds the limits and the budget; this module holds the
checks the sandbox (``engine/domain/expression_sandbox.py``) and the static scan of a template
(``engine/domain/expression_scan.py``) make on the arguments of one operation: ``'a' * 10**8``,
``'x'.center(10**9)``, ``'%*d' % (10**9, 1)``, ``range(10**9)``, ``lipsum(10**6)`` and the
filters that can make a value much larger than their input.
"""

from __future__ import annotations

import functools
import inspect
import re
import string
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeGuard

from engine.domain.expression_limits import (
    MAX_INT,
    MAX_OPERATIONS,
    MAX_SIZE,
    Exceeded,
    check_result,
    current,
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

_PERCENT = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?.", re.DOTALL)
_DIGITS = re.compile(r"\d+")


def check_width(width: Any, what: str = "a width") -> None:
    if _int(width) and width > MAX_SIZE:
        raise too_big(f"{what} of {width:,}")


def _numbers(text: str) -> Iterator[int]:
    for digits in _DIGITS.findall(text):
        yield MAX_SIZE + 1 if len(digits) > 4000 else int(digits)  # int() refuses 4,300


def _any_big(values: Any) -> None:
    """Widths taken from the values (``'%*d'``): refuse any of them past the limit."""
    if isinstance(values, Mapping):
        values = list(values.values())
    for value in values if isinstance(values, tuple | list) else (values,):
        check_width(value)


def check_percent(text: str, values: Any) -> None:
    """``text % values`` with no width or precision past the size limit."""
    star = False
    for match in _PERCENT.finditer(text):
        for part in match.groups():
            if part == "*":
                star = True
            elif part is not None:
                check_width(next(_numbers(part)))
    if star:
        _any_big(values)


def check_braces(text: str, args: Any, kwargs: Any) -> None:
    """``text.format(...)`` with no width or precision past the size limit."""
    for _literal, _field, spec, _conversion in string.Formatter().parse(text):
        if not spec:
            continue
        for number in _numbers(spec):
            check_width(number)
        if "{" in spec:  # a width taken from the arguments
            _any_big(tuple(args))
            _any_big(dict(kwargs))


def _estimate_replace(text: Any, old: Any, new: Any, count: Any) -> None:
    if not (isinstance(text, str) and isinstance(old, str) and isinstance(new, str)):
        return
    found = text.count(old) if old else len(text) + 1
    if _int(count) and count >= 0:
        found = min(found, count)
    total = len(text) + found * (len(new) - len(old))
    if total > MAX_SIZE:
        raise too_big(f"a replacement making {total:,} characters")


def _estimate_join(separator: Any, items: list[Any]) -> None:
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
            tabs = text.count("\t") if isinstance(text, str) else text.count(b"\t")
            check_width(len(text) + tabs * tabsize, "a text with its tabs expanded")
    elif name == "replace":
        rest = list(args) + [kwargs.get("count", -1)] * (3 - len(args))
        _estimate_replace(text, rest[0], rest[1], rest[2])
    elif name == "join" and args and isinstance(args[0], list):
        _estimate_join(text, args[0])
    elif name == "translate" and args and isinstance(args[0], Mapping):
        longest = max((size(v) for v in args[0].values()), default=0)
        check_width(len(text) * longest, "a translated text")
    elif name in ("format", "format_map") and isinstance(text, str):
        check_braces(text, args, args[0] if name == "format_map" and args else kwargs)


def check_filter(name: str, arguments: dict[str, Any]) -> None:
    """A filter that can make a value much larger than its input, before it runs;
    ``arguments`` are its parameters by name (as ``inspect.Signature.bind`` gives them)."""
    a = arguments
    if name == "center":
        check_width(a.get("width"))
    elif name == "indent":
        width, text = a.get("width"), a.get("s")
        if isinstance(text, str) and (_int(width) or isinstance(width, str)):
            each = len(width) if isinstance(width, str) else width
            check_width(len(text) + (text.count("\n") + 1) * each, "an indented text")
        else:
            check_width(width)
    elif name == "wordwrap":
        text, width, wrap = a.get("s"), a.get("width"), a.get("wrapstring")
        if isinstance(text, str) and isinstance(wrap, str) and _int(width) and width > 0:
            check_width(len(text) + (len(text) // width + 1) * len(wrap), "a wrapped text")
    elif name == "replace":
        _estimate_replace(a.get("s"), a.get("old"), a.get("new"), a.get("count"))
    elif name == "join" and isinstance(a.get("value"), list) and a.get("attribute") is None:
        _estimate_join(str(a.get("d", "")), a["value"])
    elif name == "format" and isinstance(a.get("value"), str):
        check_percent(a["value"], a.get("kwargs") or a.get("args", ()))
    elif name in ("batch", "slice"):
        count = a.get("linecount" if name == "batch" else "slices")
        if (
            _int(count)
            and count > MAX_OPERATIONS
            and (name == "slice" or a.get("fill_with") is not None)
        ):
            raise Exceeded(f"{name} into {count:,} parts (at most {MAX_OPERATIONS:,})")


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


# Filters that take a list without going through it; and those ``check_filter`` checks.
_FREE_FILTERS = frozenset({"length", "count", "first", "last", "default", "d", "attr"})
_CHECKED_FILTERS = frozenset(
    {"center", "indent", "wordwrap", "replace", "join", "format", "batch", "slice"}
)


def bind_filter(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[int, inspect.BoundArguments] | None:
    """A filter call's parameters by name, and how many of the leading ``args`` (what jinja2
    injects) its signature does not name: an async-variant filter takes an eval context its
    sync signature lacks. None when the arguments do not fit (the filter will say so)."""
    injects = getattr(fn, "jinja_pass_arg", None) is not None
    skip = int(injects and getattr(inspect.unwrap(fn), "jinja_pass_arg", None) is None)
    try:
        bound = inspect.signature(fn).bind(*args[skip:], **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return skip, bound


def bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` ticking the budget (once per item of a list it is given), checked before it
    runs where it can make a much bigger value, and its result checked after."""
    injects = getattr(fn, "jinja_pass_arg", None) is not None

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        value = args[1 if injects else 0] if len(args) > injects else None
        sized = isinstance(value, list | tuple | dict | range) and name not in _FREE_FILTERS
        current().tick(1 + len(value) if sized and value is not None else 1)
        if name not in _CHECKED_FILTERS:
            return check_result(fn(*args, **kwargs))
        if name == "join" and len(args) > injects and not isinstance(value, list):
            args = (*args[:injects], list(args[injects]), *args[injects + 1 :])
        found = bind_filter(fn, args, kwargs)
        if found is not None:
            check_filter(name, dict(found[1].arguments))
        return check_result(fn(*args, **kwargs))

    return bounded
