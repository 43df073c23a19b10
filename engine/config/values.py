"""Reading untrusted YAML/JSON values into typed ones, collecting every problem on the way.

Shared by ``engine.config`` (``app.yaml``) and ``engine.config.workflows`` (workflow graphs). Every
problem is one line that starts with the path of the bad value (``server.port: ...``), so a bad
configuration is reported in full at start, not one error per restart.

``${VAR}`` / ``${VAR:-default}`` substitution runs on parsed values, never on the YAML text, so an
environment value cannot inject YAML structure. A string produced by substitution is a
``Substituted`` (a ``str`` subclass) and typed readers accept it for numbers and booleans
(``port: "${PORT:-8080}"``); an empty substituted value counts as absent. Literal YAML strings
are never coerced: ``port: "8080"`` is a type error, as is ``port: true``.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

# Each rule once, as the text both the parsers here and the API's JSON Schema use
# (``engine.config.workflow_schema``).
NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}"
NAME_RE = re.compile(NAME + r"\Z")
CALLABLE_RE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")
_TOKEN = re.compile(r"\$\$\{|\$\{")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT_TEXT = re.compile(r"[+-]?\d+\Z")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


class Substituted(str):
    """A string that came out of ``${...}`` substitution (typed readers may coerce it)."""

    __slots__ = ()


def join(path: str, key: object) -> str:
    """``join("a", "b") == "a.b"``, ``join("a", 2) == "a[2]"``, ``join("", "b") == "b"``."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return f"string {json.dumps(str(value))}"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def suggest(word: str, choices: Iterable[str], *, list_all: bool = True) -> str:
    """`` (did you mean X?)`` when a close match exists, else (``list_all``) the allowed ones."""
    options = sorted(choices)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]}?)"
    return f" (expected one of: {', '.join(options)})" if options and list_all else ""


def substitute(value: Any, env: Mapping[str, str], path: str, problems: list[str]) -> Any:
    """Expand ``${VAR}``, ``${VAR:-default}`` and ``$${`` in every string scalar (not keys)."""
    if isinstance(value, str):
        return _substitute_text(value, env, path, problems)
    if isinstance(value, dict):
        return {k: substitute(v, env, join(path, str(k)), problems) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, env, join(path, i), problems) for i, v in enumerate(value)]
    return value


def _substitute_text(text: str, env: Mapping[str, str], path: str, problems: list[str]) -> str:
    parts: list[str] = []
    expanded = False
    pos = 0
    while (m := _TOKEN.search(text, pos)) is not None:
        parts.append(text[pos : m.start()])
        pos = m.end()
        if m.group() == "$${":
            parts.append("${")
            continue
        close = text.find("}", pos)
        if close < 0:
            problems.append(f"{path}: unterminated ${{ in {json.dumps(text)} (write $${{ for $)")
            parts.append(text[m.start() :])
            pos = len(text)
            break
        name, sep, default = text[pos:close].partition(":-")
        pos = close + 1
        expanded = True
        if not _VAR_NAME.match(name):
            problems.append(
                f"{path}: invalid variable reference {json.dumps(text[m.start() : pos])}"
            )
        elif env.get(name) or (name in env and not sep):
            parts.append(env[name])
        elif sep:
            parts.append(default)
        else:
            problems.append(f"{path}: environment variable {name} is not set")
    parts.append(text[pos:])
    result = "".join(parts)
    return Substituted(result) if expanded else result


def plain(value: Any) -> Any:
    """``value`` with every ``Substituted`` turned back into a plain ``str`` (deep copy)."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def json_problem(value: Any, path: str) -> str | None:
    """The first value under ``path`` that JSON cannot carry (dates, sets, non-str keys...)."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path}: must be a finite number"
    if isinstance(value, list):
        for i, item in enumerate(value):
            if (found := json_problem(item, join(path, i))) is not None:
                return found
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}: keys must be strings, got {type_name(key)}"
            if (found := json_problem(item, join(path, key))) is not None:
                return found
        return None
    return f"{path}: must be JSON data (string, number, boolean, list, mapping), got " + (
        type_name(value)
    )


def _absent(value: Any) -> bool:
    return value is None or (isinstance(value, Substituted) and value == "")


class Section:
    """A mapping being read: typed getters that record problems at ``path.key`` and return the
    default (or ``None``) for a bad value, so reading continues and every problem is found."""

    def __init__(
        self,
        raw: Any,
        path: str,
        problems: list[str],
        allowed: Iterable[str] | None = None,
    ) -> None:
        self.path = path
        self.problems = problems
        self.data: dict[str, Any] = {}
        self.valid = True
        if raw is None:
            return
        if not isinstance(raw, dict):
            self.valid = False
            problems.append(f"{path or '(root)'}: must be a mapping, got {type_name(raw)}")
            return
        names = None if allowed is None else frozenset(allowed)
        for key, value in raw.items():
            if not isinstance(key, str):
                problems.append(f"{join(path, str(key))}: keys must be strings")
            elif names is not None and key not in names:
                problems.append(f"{join(path, key)}: unknown key{suggest(key, names)}")
            else:
                self.data[key] = value

    def at(self, key: str) -> str:
        return join(self.path, key)

    def has(self, key: str) -> bool:
        return not _absent(self.data.get(key))

    def raw(self, key: str) -> Any:
        value = self.data.get(key)
        return None if _absent(value) else value

    def error(self, key: str, message: str) -> None:
        self.problems.append(f"{self.at(key)}: {message}")

    def text(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                self.error(key, "required")
            return default
        if not isinstance(value, str):
            self.error(key, f"must be a string, got {type_name(value)}")
            return default
        if required and not value:
            self.error(key, "must not be empty")
            return default
        return str(value)

    def integer(
        self, key: str, default: int | None, lo: int | None, hi: int | None = None
    ) -> int | None:
        """An integer (never a boolean) in ``lo..hi`` (either bound may be None)."""
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, Substituted) and _INT_TEXT.match(value.strip()):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(key, f"must be an integer, got {type_name(value)}")
            return default
        if lo is not None and hi is not None and not lo <= value <= hi:
            self.error(key, f"must be {lo}..{hi}, got {value}")
            return default
        if lo is not None and value < lo:
            self.error(key, f"must be at least {lo}, got {value}")
            return default
        if hi is not None and value > hi:
            self.error(key, f"must be at most {hi}, got {value}")
            return default
        return value

    def number(self, key: str, default: float | None, lo: float, hi: float) -> float | None:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, Substituted):
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.error(key, f"must be a number, got {type_name(value)}")
            return default
        if not (math.isfinite(value) and lo <= value <= hi):
            self.error(key, f"must be {lo:g}..{hi:g}, got {value:g}")
            return default
        return float(value)

    def flag(self, key: str, default: bool | None) -> bool | None:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, Substituted) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if not isinstance(value, bool):
            self.error(key, f"must be true or false, got {type_name(value)}")
            return default
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        """A list of non-empty strings (a single string is an error: lists are explicit)."""
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.error(key, f"must be a list of strings, got {type_name(value)}")
            return ()
        out: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item:
                self.problems.append(
                    f"{join(self.at(key), i)}: must be a non-empty string, got {type_name(item)}"
                )
            else:
                out.append(str(item))
        return tuple(out)

    def choice(self, key: str, default: str | None, choices: Iterable[str]) -> str | None:
        options = tuple(choices)
        value = self.text(key)
        if value is None:
            return default
        if value not in options:
            self.error(key, f"must be one of {', '.join(options)}, got {json.dumps(value)}")
            return default
        return value

    def url(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        """An http(s) URL; an empty string counts as unset unless required."""
        value = self.text(key, required=required)
        if value is None or (not value and not required):
            return default
        if not re.match(r"https?://[^/\s]+", value):
            self.error(key, f"must be an http:// or https:// URL, got {json.dumps(value)}")
            return default
        return value
