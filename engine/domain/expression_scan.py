"""What a workflow's template shows it would cost, read without running it.

``check_template`` (``engine/domain/expressions.py``) parses a template when a workflow loads and
hands the tree here: for-loops nested too deep or over constant ranges too long, and constants
that make a value too big (``'a' * 10**8``), are refused before any run, with the checks the
sandbox would make when it ran (``engine/domain/expression_checks.py``).
"""

from __future__ import annotations

import inspect
from typing import Any

from jinja2 import nodes
from jinja2.exceptions import SecurityError, TemplateAssertionError
from jinja2.utils import generate_lorem_ipsum

from engine.domain import expression_limits as limits
from engine.domain.expression_calls import allowed_methods, filter_cost, refuse_cost
from engine.domain.expression_checks import (
    check_binop,
    check_lipsum,
    check_method,
    check_range,
)
from engine.domain.expression_limits import Exceeded, check_result
from engine.domain.expression_sandbox import ENV, TEXT_METHODS

__all__ = ["scan"]


def scan(node: nodes.Node) -> None:
    """Refuse (``Exceeded``) what the parsed template ``node`` shows past a limit."""
    _scan(node, 0, 1)


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
        check_binop(node.operator, left, right)
        try:
            return check_result(ENV.binop_table[node.operator](left, right))
        except (ArithmeticError, TypeError, ValueError):
            return _UNKNOWN
    if isinstance(node, nodes.Test) and node.name not in ENV.tests:
        raise TemplateAssertionError(f"no test named {node.name!r}", node.lineno)
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
        fn = ENV.filters.get(node.name)
        if fn is None:  # jinja2 would refuse it when compiling, when the step runs
            raise TemplateAssertionError(f"no filter named {node.name!r}", node.lineno)
        fn = inspect.unwrap(fn)
        injected = (None,) if getattr(fn, "jinja_pass_arg", None) is not None else ()
        refuse_cost(
            filter_cost(node.name, fn, (*injected, subject, *args), kwargs),
            f"the filter {node.name}",
        )
        return _UNKNOWN
    callee = node.node
    if isinstance(callee, nodes.Name) and callee.name == "range":
        if args and all(isinstance(arg, int) for arg in args) and not kwargs:
            try:
                numbers = range(*args)
            except (TypeError, ValueError):
                return _UNKNOWN
            return check_range(numbers)
    elif isinstance(callee, nodes.Name) and callee.name == "lipsum":
        try:
            bound = inspect.signature(generate_lorem_ipsum).bind(*args, **kwargs)
        except TypeError:
            return _UNKNOWN
        bound.apply_defaults()
        check_lipsum(*bound.arguments.values())
    elif isinstance(callee, nodes.Getattr):
        allowed = allowed_methods(subject)
        if allowed is not None and callee.attr not in allowed:
            raise SecurityError(
                f"access to attribute {callee.attr!r} of {type(subject).__name__!r} is unsafe"
            )
        if callee.attr in TEXT_METHODS:
            text = subject if isinstance(subject, str) else ""
            check_method(text, callee.attr, tuple(args), kwargs)
    return _UNKNOWN
