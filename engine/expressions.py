"""Workflow argument and reason expressions, evaluated in a sandboxed jinja2 environment.

Only the workflow author's text is a template. Values that arrive in ``input`` or step outputs
are passed as variables and are never rendered as templates, so an input value such as
``{{ 7*7 }}`` reaches the connector literally. A string that is exactly one expression
(``"{{ input.amount }}"``) yields the native value (a number stays a number); anything else
renders to a string.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.errors import StepError


class _DataEnvironment(ImmutableSandboxedEnvironment):
    """Arguments are JSON data: ``input.items`` is the ``items`` field, not ``dict.items``.
    (jinja2 tries the attribute first; here a mapping's key wins.)"""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)


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
    env.filters["plural"] = plural
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


@functools.lru_cache(maxsize=4096)
def _template(text: str, strict: bool, prose: bool = False) -> Template:
    """Compiling a template costs about a millisecond; workflows reuse the same few texts."""
    if not strict:
        return _LENIENT.from_string(text)
    return (_PROSE if prose else _ENV).from_string(text)


@functools.lru_cache(maxsize=4096)
def _expression(source: str) -> Callable[..., Any]:
    return _ENV.compile_expression(source, undefined_to_none=False)


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
            return "".join(out)
    return _template(text, strict, prose).render(**context)


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
    except TemplateError as exc:
        if strict:
            raise StepError(f"expression {template!r} failed: {exc}") from exc
        return template
    except Exception as exc:  # errors raised by user-supplied values inside the sandbox
        if strict:
            raise StepError(f"expression {template!r} failed: {exc}") from exc
        return template


def check_syntax(template: str) -> str | None:
    """The syntax error in ``template``, or None. Used when workflows are loaded."""
    if not is_template(template):
        return None
    try:
        _ENV.parse(template)
    except TemplateError as exc:
        return str(exc)
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
                value = _expression(source)(**context)
            if isinstance(value, Undefined):
                value._fail_with_undefined_error()
            if not isinstance(value, _DATA):
                raise StepError(
                    f"expression {text!r} gives a {type(value).__name__}, not data "
                    "(a string, number, boolean, list, mapping or null)"
                )
            return value
        return _render(text, context, True)
    except TemplateError as exc:
        raise StepError(f"expression {text!r} failed: {exc}") from exc
    except (ArithmeticError, TypeError, ValueError, LookupError) as exc:
        raise StepError(f"expression {text!r} failed: {exc}") from exc
