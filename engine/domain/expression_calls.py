"""Every filter, test, global and method an expression can reach, and what one call may cost.

A call made in C (``str.replace``, ``json.dumps``) holds the interpreter until it returns, and a
call written in Python (``textwrap``) does all its work before the budget is looked at again:
a deadline cannot stop either. So no call may do unbounded work. Before it runs, each one
charges the budget (``engine/domain/expression_limits.py``) for the work it is about to do (one
operation per item of a list, and per ``rate`` characters of a text: a filter written in Python
costs more a character than one made in C) and is refused when what it would make is past a
limit; after it runs, its result is checked. A filter, test or global not listed here is not
offered at all (a later jinja2 that adds one adds nothing until it is listed); a method of a
text, number, list or mapping not listed is refused as unsafe.

The sandbox (``engine/domain/expression_sandbox.py``) wraps every callable it offers with
``bounded_filter``, ``bounded_test`` or ``bounded_global``; ``check_filter`` is also what the
scan of a stored workflow (``engine/domain/expression_scan.py``) runs on constant arguments.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from engine.domain.expression_checks import (
    check_percent,
    check_size,
    check_width,
    estimate_join,
    estimate_replace,
)
from engine.domain.expression_limits import (
    CHARS_PER_OPERATION,
    MAX_INDENT,
    MAX_OPERATIONS,
    MAX_PARTS,
    MAX_SIZE,
    MAX_WIDTH,
    Exceeded,
    check_result,
    current,
    size,
)

__all__ = [
    "DROPPED_FILTERS",
    "FILTER_RATES",
    "GLOBALS",
    "METHODS",
    "TESTS",
    "allowed_methods",
    "bind_filter",
    "bounded_filter",
    "bounded_global",
    "bounded_test",
    "charge",
    "charge_method",
    "check_filter",
    "filter_cost",
    "refuse_cost",
]

FAST = CHARS_PER_OPERATION  # made in C: about 1 ns a character
MEDIUM = 16  # a regular expression or a call per word: title 0.17 µs a character (measured)
SLOW = 2  # textwrap, urlize: 0.6 to 0.9 µs a character of a 1 MiB text (measured)
ITEMS = 1  # a text cut into one item per character or word (``list``, ``sort``, ``split``)

_SLOW = {"wordwrap": SLOW, "urlize": SLOW}
_MEDIUM = dict.fromkeys(("striptags", "title", "wordcount", "xmlattr", "urlencode"), MEDIUM)
_FAST = (
    "abs attr batch capitalize center count d default dictsort e escape filesizeformat first"
    " float forceescape format groupby indent int items join last length list lower map max min"
    " plural random reject rejectattr replace reverse round safe select selectattr slice sort"
    " string sum tojson trim truncate unique upper"
).split()
# Characters of the filter's text (its value) one operation pays for, for every filter offered.
FILTER_RATES: dict[str, int] = {**dict.fromkeys(_FAST, FAST), **_MEDIUM, **_SLOW}
# Python's pformat: its time and output grow with nesting, and a Python repr is no use as data.
DROPPED_FILTERS = frozenset({"pprint"})
# Filters that take a list without going through it.
_FREE = frozenset({"length", "count", "first", "last", "default", "d", "attr"})
# Filters that make a text of a list or mapping given to them: its size is checked first.
_TEXT = frozenset(
    {"capitalize", "center", "e", "escape", "forceescape", "format", "indent", "lower", "safe"}
    | {"string", "striptags", "title", "tojson", "trim", "truncate", "upper", "urlencode"}
    | {"urlize", "wordcount", "wordwrap", "xmlattr", "replace"}
)
# Filters that make one item of each character of a text given to them.
_ITEMIZING = frozenset(
    {"batch", "groupby", "join", "list", "map", "max", "min", "random", "reject", "rejectattr"}
    | {"reverse", "select", "selectattr", "slice", "sort", "sum", "unique"}
)
_CHECKED = frozenset(
    {"center", "indent", "wordwrap", "replace", "join", "format", "batch", "slice", "tojson"}
    | {"urlize"}
)
_LINK_MARKUP = len('<a href="" rel="noopener"></a>')
# Every test is a comparison or a type check: one operation, and a text's length compared.
TESTS = frozenset(
    "!= < <= == > >= boolean callable defined divisibleby eq equalto escaped even false filter"
    " float ge greaterthan gt in integer iterable le lessthan lower lt mapping ne none number odd"
    " sameas sequence string test true undefined upper".split()
)
# range and lipsum are checked by the sandbox itself; the others cost one operation an argument.
GLOBALS = frozenset({"range", "lipsum", "dict", "cycler", "joiner", "namespace"})

_TEXT_METHODS = frozenset(
    "capitalize casefold center count endswith expandtabs find format format_map index isalnum"
    " isalpha isascii isdecimal isdigit isidentifier islower isnumeric isprintable isspace"
    " istitle isupper join ljust lower lstrip maketrans partition removeprefix removesuffix"
    " replace rfind rindex rjust rpartition rsplit rstrip split splitlines startswith strip"
    " swapcase title translate upper zfill".split()
)  # not encode: bytes are not data, and punycode is quadratic
# The methods an expression may call on a value of each type (any other is unsafe).
METHODS: dict[type, frozenset[str]] = {
    str: _TEXT_METHODS,
    bytes: frozenset(),
    bool: frozenset({"bit_length", "bit_count", "conjugate", "as_integer_ratio"}),
    int: frozenset({"bit_length", "bit_count", "conjugate", "as_integer_ratio", "is_integer"}),
    float: frozenset({"as_integer_ratio", "conjugate", "hex", "is_integer", "fromhex"}),
    list: frozenset({"copy", "count", "index"}),
    tuple: frozenset({"count", "index"}),
    dict: frozenset({"copy", "get", "items", "keys", "values"}),  # not fromkeys
    range: frozenset({"count", "index"}),
}
_MARKUP_METHODS = frozenset({"escape", "striptags", "unescape"})
_SPLITTING = frozenset({"split", "rsplit", "splitlines"})


def allowed_methods(obj: Any) -> frozenset[str] | None:
    """The methods an expression may call on ``obj``; None when its type is not a data type
    (jinja2's own objects: loops, namespaces, cyclers)."""
    found = METHODS.get(type(obj))
    if found is None and isinstance(obj, str):  # markupsafe's Markup, from escape or tojson
        return _TEXT_METHODS | _MARKUP_METHODS
    return found


def _text_cost(value: Any, rate: int) -> int:
    return len(value) // rate if isinstance(value, str | bytes) else 0


def charge_method(owner: Any, name: str, args: tuple[Any, ...]) -> None:
    """Charge a method of a data value for the work it does on ``owner`` and its arguments."""
    if isinstance(owner, list | tuple | dict | range):
        cost = len(owner) if name in ("copy", "items", "keys", "values") else len(owner) // 8
    else:
        cost = _text_cost(owner, ITEMS * 2 if name in _SPLITTING else FAST)
        if name == "striptags":
            cost = _text_cost(owner, MEDIUM)
    charge(1 + cost + sum(_text_cost(arg, FAST) for arg in args), f"the method {name}")


def _filter_cost(name: str, value: Any) -> int:
    if name in _FREE:
        return 1
    if isinstance(value, str | bytes):
        return 1 + len(value) // (ITEMS if name in _ITEMIZING else FILTER_RATES[name])
    if isinstance(value, list | tuple | dict | range | set | frozenset):
        cost = 1 + len(value)
        if name in _TEXT and not isinstance(value, range):
            made = size(value, MAX_SIZE + 1)
            check_size(made, f"a text made of a {type(value).__name__} for {name}")
            cost += made // FILTER_RATES[name]
        return cost
    return 1


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _longest_word(text: str) -> int:
    return max(map(len, text.split()), default=0)


def _indented_size(value: Any, indent: int) -> int:
    """About the length of ``value`` as JSON indented by ``indent``: its size, and for each
    item a line break and ``indent`` spaces a level; stops counting past the size limit."""
    total = size(value, MAX_SIZE + 1)
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack and total <= MAX_SIZE:
        item, depth = stack.pop()
        if isinstance(item, list | tuple | dict):
            total += (len(item) + 1) * (1 + indent * depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return total


def _linked_size(text: str, extra: int) -> int:
    """About the length of ``text`` with each word that may be a link (one with ``.``, ``@``
    or ``:``) written twice in a link whose attributes take ``extra`` more characters."""
    links = [word for word in text.split() if any(mark in word for mark in ".@:")]
    return len(text) + sum(map(len, links)) + len(links) * (_LINK_MARKUP + extra)


def check_filter(name: str, arguments: dict[str, Any]) -> int:
    """Refuse a filter call whose size parameters or predicted result are past a limit, before
    it runs; the operations its work costs beyond its input's length (0 for most).
    ``arguments`` are its parameters by name (as ``inspect.Signature.bind`` gives them)."""
    a = arguments
    if name == "center":
        check_width(a.get("width"))
    elif name == "indent":
        width, text = a.get("width"), a.get("s")
        each = check_width(len(width) if isinstance(width, str) else width, "an indent", MAX_INDENT)
        if isinstance(text, str):
            check_size(len(text) + (text.count("\n") + 1) * each, "an indented text")
    elif name == "wordwrap":
        text, wrap = a.get("s"), a.get("wrapstring")
        width = check_width(a.get("width"), "a wrap width")
        check_width(len(wrap) if isinstance(wrap, str) else None, "a wrap string", MAX_WIDTH)
        if isinstance(text, str) and width > 0:
            lines = len(text) // width + text.count("\n") + 1
            check_size(
                len(text) + lines * (len(wrap) if isinstance(wrap, str) else 1), "a wrapped text"
            )
            if a.get("break_long_words", True):
                # textwrap copies the rest of a long word for each line it cuts from it
                longest = _longest_word(text)
                return longest * longest // (2 * width * FAST) if longest > width else 0
    elif name == "replace":
        estimate_replace(a.get("s"), a.get("old"), a.get("new"), a.get("count"))
    elif name == "join" and isinstance(a.get("value"), list) and a.get("attribute") is None:
        estimate_join(str(a.get("d", "")), a["value"])
    elif name == "format" and isinstance(a.get("value"), str):
        check_percent(a["value"], a.get("kwargs") or tuple(a.get("args", ())))
    elif name in ("batch", "slice"):
        count = a.get("linecount" if name == "batch" else "slices")
        if isinstance(count, int) and abs(count) > MAX_PARTS:
            raise Exceeded(f"{name} into {count:,} parts (at most {MAX_PARTS:,})")
    elif name == "urlize":
        check_width(a.get("trim_url_limit"), "a link length")
        extra = sum(len(a.get(key) or "") for key in ("target", "rel") if _text(a.get(key)))
        if extra and isinstance(a.get("value"), str):  # each link repeats them
            check_size(_linked_size(a["value"], extra), "a text with its links")
    elif name == "tojson":
        indent = check_width(a.get("indent"), "an indent", MAX_INDENT)
        if indent and "value" in a:
            check_size(_indented_size(a["value"], indent), "JSON indented")
    return 0


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


def _mark(wrapper: Callable[..., Any]) -> Callable[..., Any]:
    wrapper.bounded = True  # type: ignore[attr-defined]  # what the sandbox's test looks for
    return wrapper


def filter_cost(
    name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> int:
    """The operations a call of the filter ``name`` costs (its input's length, and for some
    the work their parameters ask for), refusing (``Exceeded``) sizes past a limit. ``args``
    include what jinja2 injects; the scan of a stored workflow passes its constants."""
    injects = getattr(fn, "jinja_pass_arg", None) is not None
    value = args[1 if injects else 0] if len(args) > injects else None
    return _filter_cost(name, value) + _parameters_cost(name, fn, args, kwargs)


def _parameters_cost(
    name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> int:
    if name in _CHECKED and (found := bind_filter(fn, args, kwargs)) is not None:
        return check_filter(name, dict(found[1].arguments))
    return 0


def charge(cost: int, what: str) -> None:
    """Take ``cost`` operations from the running evaluation, saying what took too many."""
    budget = current()
    if cost > budget.left:
        raise Exceeded(
            f"{what} would take {cost:,} operations, more than the {max(budget.left, 0):,} "
            f"left of the {MAX_OPERATIONS:,} an expression may use"
        )
    budget.tick(cost)


def refuse_cost(cost: int, what: str) -> None:
    """What ``charge`` refuses whatever is left: used when a stored workflow is checked."""
    if cost > MAX_OPERATIONS:
        raise Exceeded(
            f"{what} would take {cost:,} operations, more than the {MAX_OPERATIONS:,} "
            "an expression may use"
        )


def bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` charging the budget for its work before it runs, refused before it runs where
    it would make too big a value or do more work than the budget has left, and its result
    checked after. Refuses a filter that is not listed in ``FILTER_RATES``."""
    if name not in FILTER_RATES:
        raise Exceeded(f"the filter {name!r} is not one an expression may use")
    injects = getattr(fn, "jinja_pass_arg", None) is not None

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        value = args[injects] if len(args) > injects else None
        charge(_filter_cost(name, value), f"the filter {name}")
        if name == "join" and value is not None and not isinstance(value, list):
            args = (*args[:injects], list(value), *args[injects + 1 :])  # counted as it goes
        charge(_parameters_cost(name, fn, args, kwargs), f"the filter {name}")
        return check_result(fn(*args, **kwargs))

    return _mark(bounded)


def bounded_test(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A test charging one operation, and the length of a text it compares."""
    if name not in TESTS:
        raise Exceeded(f"the test {name!r} is not one an expression may use")

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        current().tick(1 + sum(_text_cost(arg, FAST) for arg in args))
        return fn(*args, **kwargs)

    return _mark(bounded)


def bounded_global(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A global (``dict``, ``cycler``, ``joiner``, ``namespace``) charging one operation an
    argument, its result checked."""
    if name not in GLOBALS:
        raise Exceeded(f"the function {name!r} is not one an expression may use")

    def bounded(*args: Any, **kwargs: Any) -> Any:
        current().tick(1 + len(args) + len(kwargs))
        made = fn(*args, **kwargs)
        return check_result(made) if isinstance(made, Mapping) else made

    bounded.__name__ = bounded.__qualname__ = name  # not wraps: a class's __dict__ is not ours
    bounded.__doc__ = fn.__doc__
    return _mark(bounded)
