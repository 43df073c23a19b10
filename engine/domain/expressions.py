"""Workflow argument and reason expressions, evaluated in a sandboxed jinja2 environment.

Only the workflow author's text is a template. Values that arrive in ``input`` or step outputs
are passed as variables and are never rendered as templates, so an input value such as
``{{ 7*7 }}`` reaches the connector literally. A string that is exactly one expression
(``"{{ input.amount }}"``) yields the native value (a number stays a number); anything else
renders to a string.

Every evaluation is held to the limits of ``engine/domain/expression_limits.py``: the sandbox counts
loop iterations (its code generator wraps every for-loop's iterable), calls, filters and the
operators that can make big values (``*``, ``**``, ``+``, ``%``, ``~``), refuses what would be
too big before it is made, and bounds the rendered output; ``check_template`` refuses what a
workflow's text shows without running it. Past a limit: ``ExpressionLimit``.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, Undefined, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.filters import make_attrgetter
from jinja2.runtime import LoopContext, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import generate_lorem_ipsum, pass_environment

from engine.domain import expression_limits as limits
from engine.domain.errors import ExpressionLimit, StepError
from engine.domain.expression_limits import (
    CountedIterable,
    Exceeded,
    bounded_concat,
    bounded_filter,
    check_result,
    current,
)


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
    return limits.check_range(range(*args))


def _lipsum(*args: Any, **kwargs: Any) -> str:
    bound = inspect.signature(generate_lorem_ipsum).bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    limits.check_lipsum(a["n"], a["html"], a["min"], a["max"])
    current().tick(a["n"] if isinstance(a["n"], int) else 1)
    return str(generate_lorem_ipsum(*args, **kwargs))


_TEXT_METHODS = frozenset(
    {"center", "ljust", "rjust", "zfill", "expandtabs", "replace", "join", "translate"}
    | {"format", "format_map"}
)


class _DataEnvironment(ImmutableSandboxedEnvironment):
    """Arguments are JSON data: ``input.items`` is the ``items`` field, not ``dict.items``.
    (jinja2 tries the attribute first; here a mapping's key wins.) Everything that can loop
    or make a big value is counted and bounded (``engine/domain/expression_limits.py``)."""

    code_generator_class = _CountingGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})
    concat = staticmethod(bounded_concat)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.filters = {name: bounded_filter(name, fn) for name, fn in self.filters.items()}
        self.filters["sum"] = _sum
        self.globals.update(range=_range, lipsum=_lipsum)

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

    def counted(self, items: Any) -> CountedIterable:
        return CountedIterable(items)

    def joined(self, parts: tuple[Any, ...]) -> str:
        current().tick()
        texts = [part if isinstance(part, str) else str(part) for part in parts]
        if sum(map(len, texts)) > limits.MAX_SIZE:
            raise Exceeded(f"a text longer than {limits.MAX_SIZE:,} characters")
        return "".join(texts)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        current().tick()
        limits.check_binop(operator, left, right)
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
        if isinstance(owner, str | bytes) and getattr(method, "__name__", "") in _TEXT_METHODS:
            if method.__name__ == "join" and args and not isinstance(args[0], list):
                args = (list(args[0]), *args[1:])
            limits.check_method(owner, method.__name__, args, kwargs)
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
    """What an expression in text a person reads shows for a null: nothing, not ``None``."""
    return "" if value is None else value


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


def _environment(undefined: type[Undefined], *, prose: bool) -> _DataEnvironment:
    env = _DataEnvironment(
        undefined=undefined, autoescape=False, finalize=_blank_none if prose else None
    )
    env.filters["plural"] = bounded_filter("plural", plural)
    return env


_ENV = _environment(StrictUndefined, prose=False)  # arguments: data, ``None`` as jinja has it
# Reasons, summaries and prompts: text a person (or an LLM) reads, where a null shows nothing.
_PROSE = _environment(StrictUndefined, prose=True)
_LENIENT = _environment(Undefined, prose=True)
_DATA = (str, int, float, bool, type(None), list, dict, tuple)
_SINGLE = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}\s*$", re.DOTALL)
_MARKERS = ("{{", "{%", "{#")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = re.compile(rf"^\s*{_NAME}(?:\.{_NAME})*\s*$")
_LITERALS = frozenset({"true", "false", "none", "True", "False", "None"})


def _check_length(text: str) -> None:
    if len(text) > limits.MAX_TEMPLATE:
        raise Exceeded(
            f"a template of {len(text):,} characters (at most {limits.MAX_TEMPLATE:,} "
            "unless it is only text and {{ a.b }} paths)"
        )


@functools.lru_cache(maxsize=4096)
def _template(text: str, strict: bool, prose: bool = False) -> Template:
    """Compiling a template costs about a millisecond; workflows reuse the same few texts."""
    _check_length(text)
    if not strict:
        return _LENIENT.from_string(text)
    return (_PROSE if prose else _ENV).from_string(text)


@functools.lru_cache(maxsize=4096)
def _expression(source: str) -> Callable[..., Any]:
    _check_length(source)
    return _ENV.compile_expression(source, undefined_to_none=False)


def _bounded(run: Callable[[], Any]) -> Any:
    """``run()`` under a new budget (only jinja's paths need one)."""
    token = limits.begin()
    try:
        return run()
    except RecursionError as exc:
        raise Exceeded("nested too deep to evaluate") from exc
    except MemoryError as exc:
        raise Exceeded("out of memory") from exc
    finally:
        limits.end(token)


def _limit_error(exc: Exceeded, text: str) -> ExpressionLimit:
    shown = text if len(text) <= 200 else text[:200] + "..."
    return ExpressionLimit(f"expression limit: {exc.why}, in {shown!r}")


@functools.lru_cache(maxsize=4096)
def _path(source: str) -> tuple[str, ...] | None:
    """``input.order.id`` as its names; None for any other expression."""
    if _DOTTED.match(source) is None:
        return None
    names = tuple(source.strip().split("."))
    return None if names[0] in _LITERALS else names


_PART = re.compile(r"\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}", re.DOTALL)


@functools.lru_cache(maxsize=4096)
def _pieces(text: str) -> tuple[str | tuple[str, ...], ...] | None:
    """A template whose every expression is a dotted path and that has no other markup, as
    its literal text and paths in order; None for any other (jinja renders those)."""
    if "{%" in text or "{#" in text or text.endswith("\n"):  # jinja drops a last newline
        return None
    pieces: list[str | tuple[str, ...]] = []
    at = 0
    for match in _PART.finditer(text):
        path = _path(match.group("expr"))
        if path is None:
            return None
        pieces += [text[at : match.start()], path]
        at = match.end()
    pieces.append(text[at:])
    if any(isinstance(p, str) and "{{" in p for p in pieces):
        return None  # an unclosed expression: jinja's syntax error
    return tuple(pieces)


def _render(text: str, context: Mapping[str, Any], strict: bool, prose: bool = False) -> str:
    """What ``_template(text, strict, prose).render(**context)`` gives, without jinja when
    every expression is a path to data (as jinja, ``str`` of each value; in prose, a null is
    nothing)."""
    prose = prose or not strict  # the lenient environment renders prose only
    pieces = _pieces(text)
    if pieces is not None:
        out = []
        for piece in pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            found, value = _lookup(piece, context)
            if not found:
                break
            out.append("" if value is None and prose else str(value))
        else:
            return bounded_concat(out)
    template = _template(text, strict, prose)  # compiled outside the budget: once, bounded
    return str(_bounded(lambda: template.render(**context)))


def _lookup(names: tuple[str, ...], context: Mapping[str, Any]) -> tuple[bool, Any]:
    """A dotted path through mappings, as ``_DataEnvironment`` reads it when every name is a
    key; (False, None) when one is not (jinja then says why, or reads an attribute)."""
    value: Any = context
    for name in names:
        if not isinstance(value, Mapping) or name not in value:
            return False, None
        value = value[name]
    return True, value


def is_template(text: str) -> bool:
    return any(marker in text for marker in _MARKERS)


def evaluate(value: Any, context: Mapping[str, Any]) -> Any:
    """Evaluate every template string inside ``value`` (recursively through lists and dicts)
    against ``context``. Raises ``StepError`` naming the expression when it fails."""
    if isinstance(value, str):
        return _evaluate_text(value, context)
    if isinstance(value, Mapping):
        return {key: evaluate(item, context) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [evaluate(item, context) for item in value]
    return value


def render_text(template: str, context: Mapping[str, Any], *, strict: bool = False) -> str:
    """Render a reason or summary template to text. Lenient by default: a missing variable
    renders empty rather than failing the step that only wanted to describe itself. Either
    way a null value renders as nothing (``from {{ account }}`` never says "from None"), and
    the ``plural`` filter counts things in words."""
    if not is_template(template):
        return template
    try:
        return _render(template, context, strict, prose=True)
    except Exceeded as exc:
        if strict:
            raise _limit_error(exc, template) from None
        return template
    except TemplateError as exc:
        if strict:
            raise StepError(f"expression {template!r} failed: {exc}") from exc
        return template
    except Exception as exc:  # errors raised by user-supplied values inside the sandbox
        if strict:
            raise StepError(f"expression {template!r} failed: {exc}") from exc
        return template


def check_template(text: str) -> str | None:
    """Why ``text`` cannot be a workflow expression, or None: its syntax, or a limit it shows
    without running (its length, for-loops nested too deep or over constant ranges too long,
    constants that make a value too big, such as ``'a' * 10**8``). Used when workflows load."""
    if not is_template(text) or _pieces(text) is not None:
        return None
    try:
        _check_length(text)
        _scan(_ENV.parse(text), 0, 1)
    except Exceeded as exc:
        return f"expression limit: {exc.why}"
    except TemplateError as exc:
        return f"invalid expression: {exc}"
    except RecursionError:
        return "expression limit: nested too deep to read"
    return None


_UNKNOWN: Any = object()  # a value only known when the expression runs


def _scan(node: nodes.Node, loops: int, iterations: int) -> None:
    if not isinstance(node, nodes.For):
        for child in node.iter_child_nodes():
            _fold(child) if isinstance(child, nodes.Expr) else _scan(child, loops, iterations)
        return
    items = _fold(node.iter)
    for part in (node.target, node.test, *node.else_):
        if part is not None:
            _scan(part, loops, iterations)
    if loops + 1 > limits.MAX_LOOP_NESTING:
        raise Exceeded(f"for-loops nested {loops + 1} deep (at most {limits.MAX_LOOP_NESTING})")
    if isinstance(items, range | list | tuple | str):
        iterations *= len(items)
        if iterations > limits.MAX_OPERATIONS:
            raise Exceeded(
                f"loops of {iterations:,} iterations (at most {limits.MAX_OPERATIONS:,})"
            )
    for part in node.body:
        _scan(part, loops + 1, iterations)


def _fold(node: nodes.Node) -> Any:
    """``node``'s value when it is made of constants (checked as the sandbox would check it),
    else ``_UNKNOWN``; every expression inside is checked either way."""
    if isinstance(node, nodes.Const):
        return node.value
    if isinstance(node, nodes.List | nodes.Tuple):
        items = [_fold(item) for item in node.items]
        known = all(item is not _UNKNOWN for item in items)
        return (items if isinstance(node, nodes.List) else tuple(items)) if known else _UNKNOWN
    if isinstance(node, nodes.BinExpr):
        left, right = _fold(node.left), _fold(node.right)
        if left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        limits.check_binop(node.operator, left, right)
        try:
            return check_result(_ENV.binop_table[node.operator](left, right))
        except (ArithmeticError, TypeError, ValueError):
            return _UNKNOWN
    if isinstance(node, nodes.Call | nodes.Filter):
        args = [_fold(arg) for arg in node.args]
        kwargs = {pair.key: _fold(pair.value) for pair in node.kwargs}
        for extra in (node.dyn_args, node.dyn_kwargs):
            if extra is not None:
                _fold(extra)
        inner = node.node.node if isinstance(node.node, nodes.Getattr) else node.node
        subject = _fold(inner) if inner is not None else _UNKNOWN  # a filter's value, a
        return _check_call(node, subject, args, kwargs)  # method's text
    for child in node.iter_child_nodes():
        _fold(child) if isinstance(child, nodes.Expr) else _scan(child, 0, 1)
    return _UNKNOWN


def _check_call(node: nodes.Call | nodes.Filter, subject: Any, args: list[Any], kwargs: Any) -> Any:
    """What the sandbox checks before a call, on the constants of one that has them."""
    if isinstance(node, nodes.Filter):
        fn = _ENV.filters.get(node.name)
        if fn is not None:
            injected = (None,) if getattr(fn, "jinja_pass_arg", None) is not None else ()
            found = limits.bind_filter(fn, (*injected, subject, *args), kwargs)
            if found is not None:
                limits.check_filter(node.name, dict(found[1].arguments))
        return _UNKNOWN
    callee = node.node
    if isinstance(callee, nodes.Name) and callee.name == "range":
        if args and all(isinstance(arg, int) for arg in args) and not kwargs:
            try:
                numbers = range(*args)
            except (TypeError, ValueError):
                return _UNKNOWN
            return limits.check_range(numbers)
    elif isinstance(callee, nodes.Name) and callee.name == "lipsum":
        try:
            bound = inspect.signature(generate_lorem_ipsum).bind(*args, **kwargs)
        except TypeError:
            return _UNKNOWN
        bound.apply_defaults()
        limits.check_lipsum(*bound.arguments.values())
    elif isinstance(callee, nodes.Getattr) and callee.attr in _TEXT_METHODS:
        text = subject if isinstance(subject, str) else ""
        limits.check_method(text, callee.attr, tuple(args), kwargs)
    return _UNKNOWN


def _evaluate_text(text: str, context: Mapping[str, Any]) -> Any:
    if not is_template(text):
        return text
    try:
        single = _SINGLE.match(text)
        if single is not None:
            source = single.group("expr")
            path = _path(source)
            found, value = _lookup(path, context) if path is not None else (False, None)
            if not found:
                compiled = _expression(source)
                value = _bounded(lambda: compiled(**context))
            if isinstance(value, Undefined):
                value._fail_with_undefined_error()
            if not isinstance(value, _DATA):
                raise StepError(
                    f"expression {text!r} gives a {type(value).__name__}, not data "
                    "(a string, number, boolean, list, mapping or null)"
                )
            return value
        return _render(text, context, True)
    except Exceeded as exc:
        raise _limit_error(exc, text) from None
    except StepError:
        raise
    except Exception as exc:  # TemplateError, or raised by a value inside the sandbox
        raise StepError(f"expression {text!r} failed: {exc}") from exc
