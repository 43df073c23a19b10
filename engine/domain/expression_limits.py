"""What one workflow expression may cost, and the checks that hold it to that.

Expressions run on the event loop, in the process that serves the API, so each evaluation is
held to limits and one that passes one fails its step with ``ExpressionLimit`` ("expression
limit: ..."), never retried. ``engine/domain/expressions.py`` calls these checks from its sandbox
(every loop iteration, call, filter and intercepted operator ticks a ``Budget``); values are
plain Python here, and no jinja2.

    MAX_OPERATIONS      loop iterations, calls, filters and operators in one evaluation; a
                        filter over a list counts one per item
    MAX_SECONDS         CPU time of one evaluation (not its compiling), checked every 32
                        operations
    MAX_SIZE            characters of any text an expression builds or renders, and the JSON
                        size of any list or mapping it builds (1 MiB: the largest request
                        body, so passing a whole input through always fits)
    MAX_INT             the largest integer an operator may make (as JSON input allows)
    MAX_DEPTH           macro calls nested in each other, and nesting of a built value
    MAX_TEMPLATE        characters of a template that needs jinja (one made only of
                        ``{{ a.b }}`` paths is read without it and may be longer)
    MAX_LOOP_NESTING    for-loops nested in each other, checked when a workflow is loaded
"""

from __future__ import annotations

import functools
import inspect
import re
import string
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TypeGuard

from engine.domain.json_input import MAX_INT

__all__ = [
    "MAX_DEPTH",
    "MAX_INT",
    "MAX_LOOP_NESTING",
    "MAX_OPERATIONS",
    "MAX_SECONDS",
    "MAX_SIZE",
    "MAX_TEMPLATE",
    "Budget",
    "Exceeded",
]

MAX_OPERATIONS = 100_000
MAX_SECONDS = 0.2
_CHECK_EVERY = 32
MAX_SIZE = 1024 * 1024
MAX_DEPTH = 64
MAX_TEMPLATE = 8 * 1024  # compiling costs about 25 µs a character here
MAX_LOOP_NESTING = 2


class Exceeded(Exception):
    """A limit was reached; ``why`` says which, in the author's words. Not a TemplateError nor
    a LookupError, so nothing inside jinja2 takes it for an ordinary failure and goes on."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _too_big(what: str) -> Exceeded:
    return Exceeded(f"{what} (at most {MAX_SIZE:,} characters)")


class Budget:
    """The operations and time one evaluation has left."""

    __slots__ = ("check_at", "deadline", "depth", "left")

    def __init__(self) -> None:
        self.left = MAX_OPERATIONS
        # The CPU time of this thread, not wall time: a process the machine leaves waiting (a
        # loaded host) must not fail an ordinary expression. Read every _CHECK_EVERY operations,
        # since reading it is a system call.
        self.deadline = time.thread_time() + MAX_SECONDS
        self.check_at = self.left
        self.depth = 0

    def tick(self, cost: int = 1) -> None:
        self.left -= cost
        if self.left < 0:
            raise Exceeded(
                f"more than {MAX_OPERATIONS:,} operations (loop iterations, calls, filters)"
            )
        if self.left <= self.check_at:
            self.check_at = self.left - _CHECK_EVERY
            if time.thread_time() > self.deadline:
                raise Exceeded(f"ran for more than {MAX_SECONDS} s of CPU time")


_CURRENT: ContextVar[Budget | None] = ContextVar("expression_budget", default=None)


def current() -> Budget:
    """The running evaluation's budget. Outside one (jinja folding constants while it
    compiles) this refuses, so nothing is computed without the limits."""
    budget = _CURRENT.get()
    if budget is None:
        raise Exceeded("evaluated outside an expression budget")
    return budget


def begin() -> object:
    """Start a budget for one evaluation; pass what it returns to ``end``."""
    return _CURRENT.set(Budget())


def end(token: object) -> None:
    _CURRENT.reset(token)  # type: ignore[arg-type]


# -- sizes -------------------------------------------------------------------------------------


def size(value: Any, limit: int = MAX_SIZE) -> int:
    """About the length of ``value`` as JSON; stops counting once past ``limit``. A list that
    holds one long text many times counts it each time, as JSON would write it."""
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack and total <= limit:
        item, depth = stack.pop()
        if isinstance(item, str | bytes):
            total += len(item) + 2
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 1
        elif isinstance(item, list | tuple | set | frozenset | dict):
            if depth >= MAX_DEPTH:
                raise Exceeded(f"a value nested more than {MAX_DEPTH} deep")
            total += 2 + len(item)
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else list(item)
            if total <= limit:
                stack.extend((child, depth + 1) for child in children)
        else:
            total += 8
    return total


def check_result(value: Any) -> Any:
    """``value`` when it is within the limits; built values only (an input is data as it is)."""
    if isinstance(value, str | bytes):
        if len(value) > MAX_SIZE:
            raise _too_big(f"a text of {len(value):,} characters")
    elif isinstance(value, bool):
        pass
    elif isinstance(value, int):
        if abs(value) > MAX_INT:
            raise Exceeded(f"an integer beyond ±{MAX_INT:,}")
    elif isinstance(value, list | tuple | set | frozenset | dict):
        if (found := size(value)) > MAX_SIZE:
            raise _too_big(f"a {type(value).__name__} of more than {found:,} characters")
    return value


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
                raise _too_big(f"adding values of {total:,} characters")
    elif operator == "%" and isinstance(left, str):
        check_percent(left, right)


def _length(value: Any, limit: int = MAX_SIZE) -> int:
    """A text's characters; any other value's size."""
    return len(value) if isinstance(value, str | bytes) else size(value, limit)


def _repeat(sequence: Any, times: int) -> None:
    if times <= 1:
        return
    if _length(sequence, MAX_SIZE // times + 1) * times > MAX_SIZE:
        raise _too_big(f"a value repeated {times:,} times")


# -- widths in formats, methods and filters ----------------------------------------------------

_PERCENT = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?.", re.DOTALL)
_DIGITS = re.compile(r"\d+")


def check_width(width: Any, what: str = "a width") -> None:
    if _int(width) and width > MAX_SIZE:
        raise _too_big(f"{what} of {width:,}")


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
        raise _too_big(f"a replacement making {total:,} characters")


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
            raise _too_big(f"joining {len(items):,} items")


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
        raise _too_big(f"lipsum of {n:,} paragraphs of up to {high:,} words each")


def check_range(numbers: range) -> range:
    """``numbers`` when a loop over them fits in the operations limit."""
    try:
        length = len(numbers)
    except OverflowError:  # more than sys.maxsize
        length = abs(numbers.stop - numbers.start) // abs(numbers.step)
    if length > MAX_OPERATIONS:
        raise Exceeded(f"a range of {length:,} numbers (at most {MAX_OPERATIONS:,})")
    return numbers


# -- what the sandbox wraps ----------------------------------------------------------------------


class CountedIterable:
    """``items`` as a loop sees them (its length too), one tick per item taken."""

    __slots__ = ("items",)

    def __init__(self, items: Any) -> None:
        self.items = items

    def __iter__(self) -> Iterator[Any]:
        budget = current()
        for item in self.items:
            budget.tick()
            yield item

    def __len__(self) -> int:
        return len(self.items)


def bounded_concat(parts: Iterable[str]) -> str:
    """Rendered output (and a block's), refused as soon as it is longer than the limit."""
    out: list[str] = []
    total = 0
    for part in parts:
        total += len(part)
        if total > MAX_SIZE:
            raise Exceeded(f"output longer than {MAX_SIZE:,} characters")
        out.append(part)
    return "".join(out)


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
