"""Workflow argument and reason expressions, evaluated in a sandboxed jinja2 environment.

Only the workflow author's text is a template. Values that arrive in ``input`` or step outputs
are passed as variables and are never rendered as templates, so an input value such as
``{{ 7*7 }}`` reaches the connector literally. A string that is exactly one expression
(``"{{ input.amount }}"``) yields the native value (a number stays a number); anything else
renders to a string.

Every evaluation is held to the limits of ``engine/domain/expression_limits.py``: the sandbox
(``engine/domain/expression_sandbox.py``) counts loop iterations, calls, filters and the
operators that can make big values, refuses what would be too big before it is made, and bounds
the rendered output; ``check_template`` refuses what a workflow's text shows without running it
(``engine/domain/expression_scan.py``). Past a limit: ``ExpressionLimit``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import Template, TemplateError, Undefined

from engine.domain import expression_limits as limits
from engine.domain.errors import ExpressionLimit, StepError
from engine.domain.expression_limits import Exceeded, bounded_concat
from engine.domain.expression_sandbox import ENV, LENIENT, PROSE
from engine.domain.expression_scan import scan
from engine.domain.prose import omit_empty, shown

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
        return LENIENT.from_string(text)
    return (PROSE if prose else ENV).from_string(text)


@functools.lru_cache(maxsize=4096)
def _expression(source: str) -> Callable[..., Any]:
    _check_length(source)
    return ENV.compile_expression(source, undefined_to_none=False)


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
def _path_expression(source: str, strict: bool) -> Callable[..., Any]:
    """One path of a template too long to compile whole, as jinja reads it in that template."""
    _check_length(source)
    return (ENV if strict else LENIENT).compile_expression(source, undefined_to_none=False)


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
    every expression is a path to data (as jinja, ``str`` of each value; in prose, an empty
    value is ``prose.EMPTY``, which ``render_text`` leaves out)."""
    prose = prose or not strict  # the lenient environment renders prose only
    pieces = _pieces(text)
    if pieces is not None:
        out = []
        for piece in pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            found, value = _lookup(piece, context)
            if not found and len(text) <= limits.MAX_TEMPLATE:
                break  # jinja renders it, and says why a path is missing
            if not found:  # too long for jinja: it reads this one path alone
                compiled = _path_expression(".".join(piece), strict)
                value = _bounded(functools.partial(compiled, **context))
            out.append(shown(value) if prose else str(value))
        else:
            return bounded_concat(out)
    template = _template(text, strict, prose)  # compiled outside the budget: once, bounded
    return str(_bounded(lambda: template.render(**context)))


def _lookup(names: tuple[str, ...], context: Mapping[str, Any]) -> tuple[bool, Any]:
    """A dotted path through mappings, as the sandbox's ``DataEnvironment`` reads it when every
    name is a key; (False, None) when one is not (jinja then says why, or reads an attribute)."""
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
    the ``plural`` filter counts things in words. What an empty value would have said is left
    out (``engine.domain.prose``): "Refund {{ amount }} to {{ who }}" with neither is "Refund"."""
    if not is_template(template):
        return template
    try:
        return omit_empty(_render(template, context, strict, prose=True))
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
    if not is_template(text):
        return None
    pieces = _pieces(text)
    if pieces is not None:  # read without jinja; a path it cannot find, with jinja alone
        longest = max((len(".".join(p)) for p in pieces if isinstance(p, tuple)), default=0)
        if longest > limits.MAX_TEMPLATE:
            return (
                f"expression limit: a path of {longest:,} characters "
                f"(at most {limits.MAX_TEMPLATE:,})"
            )
        written = sum(len(p) for p in pieces if isinstance(p, str))
        if written > limits.MAX_SIZE:  # the output would be past the size limit whatever it reads
            return (
                f"expression limit: {written:,} characters of text "
                f"(the output is at most {limits.MAX_SIZE:,})"
            )
        return None
    try:
        _check_length(text)
        scan(ENV.parse(text))
    except Exceeded as exc:
        return f"expression limit: {exc.why}"
    except TemplateError as exc:
        return f"invalid expression: {exc}"
    except RecursionError:
        return "expression limit: nested too deep to read"
    return None


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
