"""Workflow argument and reason expressions, evaluated in a sandboxed jinja2 environment.

Only the workflow author's text is a template. Values that arrive in ``input`` or step outputs
are passed as variables and are never rendered as templates, so an input value such as
``{{ 7*7 }}`` reaches the connector literally. A string that is exactly one expression
(``"{{ input.amount }}"``) yields the native value (a number stays a number); anything else
renders to a string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jinja2 import StrictUndefined, TemplateError, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.errors import StepError

_ENV = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
_LENIENT = ImmutableSandboxedEnvironment(undefined=Undefined, autoescape=False)
_SINGLE = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}\s*$", re.DOTALL)
_MARKERS = ("{{", "{%", "{#")


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
    renders empty rather than failing the step that only wanted to describe itself."""
    if not is_template(template):
        return template
    env = _ENV if strict else _LENIENT
    try:
        return env.from_string(template).render(**context)
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
            value = _ENV.compile_expression(single.group("expr"), undefined_to_none=False)(
                **context
            )
            if isinstance(value, Undefined):
                value._fail_with_undefined_error()
            return value
        return _ENV.from_string(text).render(**context)
    except TemplateError as exc:
        raise StepError(f"expression {text!r} failed: {exc}") from exc
    except (ArithmeticError, TypeError, ValueError, LookupError) as exc:
        raise StepError(f"expression {text!r} failed: {exc}") from exc
