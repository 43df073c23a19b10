"""``app.yaml``'s ``tools:``: the Python callables the operator allows workflows to run.

``tools: {normalize: {function: "myco.tools:normalize", timeoutSeconds: 10}}`` declares a tool
named ``normalize``. A `tool` node names it with ``tool: normalize``. The list is the allow-list
for workflows stored through the API (``engine.config.reach``): an admin token may store a
workflow, but the operator who writes ``app.yaml`` (the shell user) decides which code runs.
Each call runs off the event loop and fails its step after ``timeoutSeconds``
(``engine.adapters.connectors.python_callable``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from engine.config.values import CALLABLE_RE, NAME_RE, Section, join, type_name

__all__ = ["DEFAULT_TOOL_TIMEOUT", "MAX_TOOL_TIMEOUT", "ToolConfig", "parse_tools"]

DEFAULT_TOOL_TIMEOUT = 30.0  # seconds; also the limit of an app.yaml function no tool declares
MAX_TOOL_TIMEOUT = 3600.0
_TOOL_KEYS = ("function", "timeoutSeconds")


@dataclass(frozen=True, slots=True)
class ToolConfig:
    """One declared tool: its ``module:function`` and how long one call may take."""

    name: str
    function: str
    timeout_seconds: float = DEFAULT_TOOL_TIMEOUT


def parse_tools(raw: Any, path: str, problems: list[str]) -> Mapping[str, ToolConfig]:
    """Every tool under ``path``; each bad key is a problem naming its YAML path."""
    tools: dict[str, ToolConfig] = {}
    section = Section(raw, path, problems)
    for name, value in section.data.items():
        at = join(path, name)
        if not NAME_RE.match(name):
            problems.append(f"{at}: invalid tool name (letters, digits, _ . -)")
            continue
        if not isinstance(value, dict):
            problems.append(f"{at}: must be a mapping with function, got {type_name(value)}")
            continue
        before = len(problems)
        s = Section(value, at, problems, _TOOL_KEYS)
        function = s.text("function", required=True)
        if function and not CALLABLE_RE.match(function):
            s.error(
                "function", f'must look like "module.path:function", got {json.dumps(function)}'
            )
        timeout = s.number("timeoutSeconds", DEFAULT_TOOL_TIMEOUT, 0.1, MAX_TOOL_TIMEOUT)
        if len(problems) == before and function:
            tools[name] = ToolConfig(name, function, timeout or DEFAULT_TOOL_TIMEOUT)
    return MappingProxyType(tools)
