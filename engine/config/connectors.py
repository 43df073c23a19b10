"""Connector definitions from ``app.yaml`` (``connectors: {name: {...}}``).

The ``demo-ledger`` connector always exists: the embedded demo workflow and the quick start rely
on it, so it is added when ``app.yaml`` does not define it (and given its default actions when
``app.yaml`` defines it without any).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from engine.config.policies import parse_rules
from engine.config.values import CALLABLE_RE, NAME_RE, Section, join, type_name
from engine.domain.expressions import check_template
from engine.domain.policy_rules import ActionKind, Rule

__all__ = [
    "DEMO_LEDGER",
    "HTTP_METHODS",
    "ActionConfig",
    "ActionKind",
    "ConnectorConfig",
    "ConnectorType",
    "demo_ledger_connector",
    "parse_connectors",
]

DEMO_LEDGER = "demo-ledger"
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_HEADER_NAME_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_CONNECTOR_KEYS = (
    "type",
    "baseUrl",
    "function",
    "headers",
    "timeoutSeconds",
    "sensitive",
    "account",
    "actions",
    "policies",
)
_ACTION_KEYS = ("kind", "summary", "method", "path")
_HTTP_ONLY = ("baseUrl", "headers")


class ConnectorType(StrEnum):
    """The one table of connector types: ``type:`` accepts exactly these, and
    ``engine.assembly.CONNECTOR_BUILDERS`` has one builder per member (a unit test checks).
    A step that posts a chat message is an ``http`` connector; approval cards and notices
    reach chat through ``channels:``, not through a connector."""

    HTTP = "http"  # POST/GET ... to baseUrl + action path, with an Idempotency-Key header
    PYTHON = "python"  # a "module:function" callable
    DEMO_LEDGER = "demo-ledger"  # the built-in in-memory ledger of the demo workflow


def _no_headers() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ActionConfig:
    """One action a connector declares. ``summary`` is jinja2 template text, stored as written
    and rendered by ``engine/domain/expressions.py``; ``method``/``path`` are set for http only."""

    name: str
    kind: ActionKind = ActionKind.WRITE
    summary: str | None = None
    method: str | None = None
    path: str | None = None


@dataclass(frozen=True, slots=True)
class ConnectorConfig:
    """A named integration; ``policies`` are its own rules (evaluated after the project's)."""

    name: str
    type: ConnectorType
    actions: Mapping[str, ActionConfig]
    base_url: str | None = None  # http
    function: str | None = None  # python: "module:function"
    headers: Mapping[str, str] = field(default_factory=_no_headers)  # http
    timeout_seconds: float = 10.0
    sensitive: bool = False  # hold every call no rule decided
    account: str | None = None
    policies: tuple[Rule, ...] = ()


def demo_ledger_connector() -> ConnectorConfig:
    """The built-in ledger connector: lookup (read), refund and note (write)."""
    return ConnectorConfig(
        name=DEMO_LEDGER,
        type=ConnectorType.DEMO_LEDGER,
        actions=_demo_actions(),
    )


def _demo_actions() -> Mapping[str, ActionConfig]:
    return MappingProxyType(
        {
            "lookup": ActionConfig("lookup", ActionKind.READ),
            "refund": ActionConfig("refund", ActionKind.WRITE),
            "note": ActionConfig("note", ActionKind.WRITE),
        }
    )


def parse_connectors(
    raw: Any,
    path: str,
    problems: list[str],
    rule_problems: list[str],
    *,
    principal_problem: Callable[[str], str | None],
    channel_problem: Callable[[str], str | None],
) -> Mapping[str, ConnectorConfig]:
    """Every connector under ``path``, plus the implicit ``demo-ledger``."""
    connectors: dict[str, ConnectorConfig] = {}
    section = Section(raw, path, problems)
    for name, value in section.data.items():
        at = join(path, name)
        if not NAME_RE.match(name):
            problems.append(f"{at}: invalid connector name (letters, digits, _ . -)")
            continue
        connector = _parse_connector(
            name, value, at, problems, rule_problems, principal_problem, channel_problem
        )
        if connector is not None:
            connectors[name] = connector
    connectors.setdefault(DEMO_LEDGER, demo_ledger_connector())
    return MappingProxyType(connectors)


def _parse_connector(
    name: str,
    raw: Any,
    path: str,
    problems: list[str],
    rule_problems: list[str],
    principal_problem: Callable[[str], str | None],
    channel_problem: Callable[[str], str | None],
) -> ConnectorConfig | None:
    before = len(problems)
    s = Section(raw, path, problems, _CONNECTOR_KEYS)
    if raw is None:
        problems.append(f"{path}: must be a mapping, got null")
    if not s.valid or raw is None:
        return None
    type_text = s.choice("type", None, [t.value for t in ConnectorType])
    if type_text is None and not s.has("type"):
        s.error("type", f"required ({', '.join(t.value for t in ConnectorType)})")
    kind = ConnectorType(type_text) if type_text else None
    if name == DEMO_LEDGER and kind not in (None, ConnectorType.DEMO_LEDGER):
        s.error("type", f"the {DEMO_LEDGER} connector must have type {DEMO_LEDGER}")
    if kind is not None:
        for key in _HTTP_ONLY:
            if s.has(key) and kind != ConnectorType.HTTP:
                s.error(key, f"only valid on http connectors, not {kind.value}")
        if s.has("function") and kind != ConnectorType.PYTHON:
            s.error("function", f"only valid on python connectors, not {kind.value}")

    base_url = s.url("baseUrl", required=kind == ConnectorType.HTTP)
    function = s.text("function", required=kind == ConnectorType.PYTHON)
    if function and not CALLABLE_RE.match(function):
        s.error("function", f'must look like "module.path:function", got {json.dumps(function)}')
    headers = _parse_headers(s)
    timeout = s.number("timeoutSeconds", 10.0, 0.1, 300.0)
    sensitive = s.flag("sensitive", False)
    account = s.text("account") or None
    actions = _parse_actions(s, kind)
    if not actions and kind == ConnectorType.DEMO_LEDGER:
        actions = dict(_demo_actions())
    policies, fatal, bad_rules = parse_rules(
        s.data.get("policies"),
        s.at("policies"),
        owner=name,
        principal_problem=principal_problem,
        channel_problem=channel_problem,
    )
    problems.extend(fatal)
    rule_problems.extend(bad_rules)
    if len(problems) > before or kind is None:
        return None
    return ConnectorConfig(
        name=name,
        type=kind,
        actions=MappingProxyType(actions),
        base_url=base_url.rstrip("/") if base_url else None,
        function=function,
        headers=MappingProxyType(headers),
        timeout_seconds=timeout or 10.0,
        sensitive=bool(sensitive),
        account=account,
        policies=policies,
    )


def _parse_headers(s: Section) -> dict[str, str]:
    raw = s.data.get("headers")
    headers: dict[str, str] = {}
    section = Section(raw, s.at("headers"), s.problems)
    for key, value in section.data.items():
        if not _HEADER_NAME_RE.match(key):
            s.problems.append(f"{section.at(key)}: invalid header name")
        elif not isinstance(value, str):
            s.problems.append(f"{section.at(key)}: must be a string, got {type_name(value)}")
        elif "\n" in value or "\r" in value:
            s.problems.append(f"{section.at(key)}: must not contain line breaks")
        else:
            headers[key] = str(value)
    return headers


def _parse_actions(s: Section, kind: ConnectorType | None) -> dict[str, ActionConfig]:
    actions: dict[str, ActionConfig] = {}
    section = Section(s.data.get("actions"), s.at("actions"), s.problems)
    http = kind == ConnectorType.HTTP
    for name, value in section.data.items():
        a = Section(value, section.at(name), s.problems, _ACTION_KEYS)
        if not NAME_RE.match(name):
            s.problems.append(f"{a.path}: invalid action name (letters, digits, _ . -)")
            continue
        if not a.valid:
            continue
        if kind is not None and not http:
            for key in ("method", "path"):
                if a.has(key):
                    a.error(key, f"only valid on http connectors, not {kind.value}")
        action_kind = a.choice("kind", ActionKind.WRITE, [k.value for k in ActionKind])
        summary = a.text("summary")
        if summary is not None and (why := check_template(summary)) is not None:
            a.error("summary", why)
        method = a.choice("method", "POST", HTTP_METHODS)
        action_path = a.text("path", "/" + name)
        if action_path is not None and not action_path.startswith("/"):
            a.error("path", f'must start with "/", got {json.dumps(action_path)}')
        actions[name] = ActionConfig(
            name=name,
            kind=ActionKind(action_kind or ActionKind.WRITE),
            summary=summary,
            method=method if http else None,
            path=action_path if http else None,
        )
    return actions
