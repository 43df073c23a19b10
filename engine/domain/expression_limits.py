"""What one workflow expression may cost, and the checks that hold it to that.

Expressions run on the event loop, in the process that serves the API, so each evaluation is
held to limits and one that passes one fails its step with ``ExpressionLimit`` ("expression
limit: ..."), never retried. ``engine/domain/expressions.py`` calls these checks from its sandbox
(every loop iteration, call, filter and intercepted operator ticks a ``Budget``); what an
operator, method or filter would make is checked before it runs by
``engine/domain/expression_checks.py``. Values are plain Python here, and no jinja2.

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
    MAX_WIDTH           a width or precision to pad a text to (``center``, ``ljust``, ``%*d``,
                        ``{:>n}``), a ``wordwrap`` width, a ``truncate`` length
    MAX_INDENT          an indent (``indent``, ``tojson(indent=...)``)
    MAX_PARTS           parts a list is cut into (``batch``, ``slice``)
    CHARS_PER_OPERATION characters of text one operation pays for in a call made in C (a
                        filter or method over a text charges its length before it runs; the
                        filters written in Python charge more: ``expression_calls.py``)

No single call may do unbounded work: a call made in C holds the interpreter until it returns,
so a deadline cannot stop it. Every filter, test, global and method an expression can reach
charges the budget for the work it is about to do and is refused when what it would make is
past a limit, before it runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

from engine.domain.json_input import MAX_INT

__all__ = [
    "CHARS_PER_OPERATION",
    "MAX_DEPTH",
    "MAX_INDENT",
    "MAX_INT",
    "MAX_LOOP_NESTING",
    "MAX_OPERATIONS",
    "MAX_PARTS",
    "MAX_SECONDS",
    "MAX_SIZE",
    "MAX_TEMPLATE",
    "MAX_WIDTH",
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
MAX_WIDTH = 4096
MAX_INDENT = 32
MAX_PARTS = 10_000
CHARS_PER_OPERATION = 1024  # about 2 µs of work in C, as one operation is in the sandbox


class Exceeded(Exception):
    """A limit was reached; ``why`` says which, in the author's words. Not a TemplateError nor
    a LookupError, so nothing inside jinja2 takes it for an ordinary failure and goes on."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def too_big(what: str) -> Exceeded:
    """The error for a value past ``MAX_SIZE``, saying what it was."""
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
            raise too_big(f"a text of {len(value):,} characters")
    elif isinstance(value, bool):
        pass
    elif isinstance(value, int):
        if abs(value) > MAX_INT:
            raise Exceeded(f"an integer beyond ±{MAX_INT:,}")
    elif isinstance(value, list | tuple | set | frozenset | dict):
        if (found := size(value)) > MAX_SIZE:
            raise too_big(f"a {type(value).__name__} of more than {found:,} characters")
    return value


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
