"""The sandboxed jinja2 environment workflow expressions run in, every costly step counted.

jinja2's sandbox keeps a template from reaching Python internals; this one also counts loop
iterations (its code generator wraps every for-loop's iterable), calls, filters and the operators
that can make big values (``*``, ``**``, ``+``, ``%``, ``~``) against the evaluation's budget, and
refuses what would be too big before it is made (``engine/domain/expression_checks.py``).
Arguments are JSON data: a mapping's key wins over a Python attribute of the same name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, cast

from jinja2 import StrictUndefined, Undefined, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.filters import make_attrgetter
from jinja2.runtime import LoopContext, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import generate_lorem_ipsum, pass_environment

from engine.domain import expression_limits as limits
from engine.domain.expression_calls import (
    FILTER_RATES,
    GLOBALS,
    TESTS,
    allowed_methods,
    bounded_filter,
    bounded_global,
    bounded_test,
    charge_method,
)
from engine.domain.expression_checks import (
    check_binop,
    check_lipsum,
    check_method,
    check_range,
)
from engine.domain.expression_limits import (
    CountedIterable,
    Exceeded,
    bounded_concat,
    check_result,
    current,
)
from engine.domain.prose import EMPTY, shown

__all__ = ["ENV", "LENIENT", "PROSE", "TEXT_METHODS", "DataEnvironment", "plural"]


class _CountingGenerator(CodeGenerator):
    """jinja2's code generator, but every for-loop iterates ``environment.counted(...)`` and
    ``a ~ b`` is ``environment.joined(...)`` (bounded) instead of a plain join. (jinja2 allows
    no node types of our own, so the loop's iterable is marked and wrapped as it is written.)"""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loop_iterables: set[int] = set()

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        self._loop_iterables.add(id(node.iter))
        super().visit_For(node, frame)

    def visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        if id(node) not in self._loop_iterables:
            return super().visit(node, *args, **kwargs)
        self.write("environment.counted(")
        super().visit(node, *args, **kwargs)
        self.write(")")
        return None

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.joined((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


@pass_environment
def _sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    """jinja2's ``sum``, one item at a time: adding lists in one C call could take seconds."""
    if attribute is not None:
        iterable = map(make_attrgetter(environment, attribute), iterable)
    total = start
    for item in iterable:
        total = environment.call_binop(None, "+", total, item)
    return total


def _range(*args: int) -> range:
    return check_range(range(*args))


def _lipsum(*args: Any, **kwargs: Any) -> str:
    bound = inspect.signature(generate_lorem_ipsum).bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    check_lipsum(a["n"], a["html"], a["min"], a["max"])
    current().tick(a["n"] if isinstance(a["n"], int) else 1)
    return str(generate_lorem_ipsum(*args, **kwargs))


TEXT_METHODS = frozenset(
    {"center", "ljust", "rjust", "zfill", "expandtabs", "replace", "join", "translate"}
    | {"format", "format_map"}
)


class DataEnvironment(ImmutableSandboxedEnvironment):
    """Arguments are JSON data: ``input.items`` is the ``items`` field, not ``dict.items``.
    (jinja2 tries the attribute first; here a mapping's key wins.) Everything that can loop
    or make a big value is counted and bounded (``engine/domain/expression_limits.py``)."""

    code_generator_class = _CountingGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})
    concat = staticmethod(bounded_concat)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Only what expression_calls lists, each wrapped: a filter a later jinja2 adds is not
        # offered until it is listed with what it may cost.
        filters = {**self.filters, "sum": _sum}
        self.filters = {
            name: bounded_filter(name, fn) for name, fn in filters.items() if name in FILTER_RATES
        }
        tests = cast("dict[str, Callable[..., Any]]", self.tests)
        self.tests = {name: bounded_test(name, fn) for name, fn in tests.items() if name in TESTS}
        functions = {**self.globals, "range": _range, "lipsum": _lipsum}
        self.globals = {
            name: bounded_global(name, cast("Callable[..., Any]", fn))
            for name, fn in functions.items()
            if name in GLOBALS
        }

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        """A method of a text, number, list or mapping only when ``expression_calls`` lists it
        (one whose cost is bounded); other attributes as jinja2's immutable sandbox has them."""
        if not super().is_safe_attribute(obj, attr, value):
            return False
        allowed = allowed_methods(obj)
        return allowed is None or not callable(value) or attr in allowed

    def counted(self, items: Any) -> CountedIterable:
        return CountedIterable(items)

    def joined(self, parts: tuple[Any, ...]) -> str:
        current().tick()
        texts = [part if isinstance(part, str) else str(check_result(part)) for part in parts]
        if sum(map(len, texts)) > limits.MAX_SIZE:
            raise Exceeded(f"a text longer than {limits.MAX_SIZE:,} characters")
        return "".join(texts)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        current().tick()
        check_binop(operator, left, right)
        value = self.binop_table[operator](left, right)
        # A list made by + or * had its size checked before it was made: do not walk it again.
        return value if isinstance(value, list | tuple) else check_result(value)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        if isinstance(__obj, LoopContext) and args:  # a recursive loop's next level
            args = (CountedIterable(args[0]), *args[1:])
        method = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
        owner = getattr(method, "__self__", None)
        if allowed_methods(owner) is not None:
            charge_method(owner, getattr(method, "__name__", ""), args)
        if isinstance(owner, str | bytes) and getattr(method, "__name__", "") in TEXT_METHODS:
            if method.__name__ == "join" and args and not isinstance(args[0], list):
                args = (list(args[0]), *args[1:])
            check_method(owner, method.__name__, args, kwargs)
        if not isinstance(__obj, Macro):
            return check_result(super().call(__context, __obj, *args, **kwargs))
        budget.depth += 1
        try:
            if budget.depth > limits.MAX_DEPTH:
                raise Exceeded(f"macro calls nested more than {limits.MAX_DEPTH} deep")
            return check_result(super().call(__context, __obj, *args, **kwargs))
        finally:
            budget.depth -= 1


def _blank_none(value: Any) -> Any:
    """What an expression in text a person reads shows for an empty value (a null, a blank
    text, an empty list, a missing variable): the mark ``omit_empty`` leaves out with what led
    to it, never ``None``; a value no bigger than the size limit (before ``str`` makes a text
    of it)."""
    if isinstance(value, Undefined) and not isinstance(value, StrictUndefined):
        return EMPTY  # lenient; a strict one still raises when printed
    return shown(check_result(value))


def plural(value: Any, singular: str, plural_form: str | None = None) -> str:
    """``{{ args.to | plural("recipient") }}``: the count and the word, in the plural unless
    the count is 1 ("1 recipient", "3 recipients"; ``plural("person", "people")`` for an
    irregular one). ``value`` is a number or a list or mapping (its length)."""
    if isinstance(value, list | tuple | Mapping):
        count = len(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        count = value
    else:
        raise TypeError(f"plural needs a number or a list, not {type(value).__name__}")
    word = singular if count == 1 else (plural_form or singular + "s")
    return f"{count} {word}"


def _environment(undefined: type[Undefined], *, prose: bool) -> DataEnvironment:
    env = DataEnvironment(
        undefined=undefined, autoescape=False, finalize=_blank_none if prose else check_result
    )
    env.filters["plural"] = bounded_filter("plural", plural)
    return env


ENV = _environment(StrictUndefined, prose=False)  # arguments: data, ``None`` as jinja has it
# Reasons, summaries and prompts: text a person (or an LLM) reads, where a null shows nothing.
PROSE = _environment(StrictUndefined, prose=True)
LENIENT = _environment(Undefined, prose=True)
