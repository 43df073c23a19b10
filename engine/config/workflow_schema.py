"""The workflow format (``{name, nodes}``) as JSON Schema, built from the parser's own tables.

``POST /v1/workflows`` validates its body against this schema before the parser sees it, and
``/openapi.json`` publishes it, so the document says what the server accepts: each node's keys
by type, the keys each type requires, id and name patterns, bounds. It is built from the same
key tables, patterns and bounds as ``engine.config.workflows``, so the two cannot drift.

What no JSON Schema can say stays with the parser and ``AppConfig.workflow_problems``: ids
unique, ``next``/``onDeny`` naming a node, no cycles, ``remindBeforeMinutes`` and
``escalateAfterMinutes`` below ``timeoutMinutes``, ``approvalsRequired`` within the approvers,
templates that parse, and the names of connectors, actions, people, webhooks and workflows that
the configuration knows.

Patterns are anchored as ``^...(?!\\n)$``: ``$`` alone also matches before a final newline in
Python (the server's validator) but not in JavaScript, so ``"a\\n"`` would be valid to one
reader of the document and not to another; the look-ahead makes both refuse it, as the parser
does. Character classes are ASCII, read the same by both.
"""

from __future__ import annotations

from typing import Any

from engine.config.channels import channel_pattern
from engine.config.values import NAME
from engine.config.workflows import (
    MAX_MINUTES,
    NODE_ID,
    NODE_KEYS,
    ONLY_ON,
    REQUIRED_KEYS,
)
from engine.domain.model import END, NodeType, TimeoutBehavior

__all__ = ["MAX_NAMES", "MAX_NODES", "WORKFLOW_BODY", "anchored"]

# Sizes only the API bounds (``app.yaml`` is the operator's own): a stored workflow is checked
# node by node in Python, ~2 ms per node with long lists, so these keep one body's check short.
MAX_NODES = 200
MAX_NAMES = 50  # approvers, escalateTo, channels

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_IDENT}(\.{_IDENT})*"


def anchored(pattern: str) -> str:
    """``pattern`` matching a whole string, read alike by Python's ``re`` and JavaScript."""
    return rf"^(?:{pattern})(?!\n)$"


def _text(pattern: str | None = None) -> dict[str, Any]:
    if pattern is None:
        return {"type": "string", "minLength": 1}
    return {"type": "string", "pattern": anchored(pattern)}


def _names(**more: Any) -> dict[str, Any]:
    # maxItems first: jsonschema checks keywords in order, so an over-long list is refused
    # before its items and uniqueness (quadratic for mixed types) are looked at.
    return {"maxItems": MAX_NAMES, "type": "array", "items": _text(), "uniqueItems": True, **more}


def _minutes() -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": MAX_MINUTES}


_FLAG = {"type": "boolean"}
_NODE_ID = {**_text(NODE_ID), "not": {"const": END}}
# engine.config.channels.check_channel's table, as one pattern.
_CHANNEL = anchored(channel_pattern())

PROPERTIES: dict[str, dict[str, Any]] = {
    "id": _NODE_ID,
    "type": {"type": "string", "enum": [t.value for t in NodeType]},
    # A node id or "end" (which has the shape of an id).
    "next": _text(NODE_ID),
    "approvers": _names(),
    "approvalsRequired": {"type": "integer", "minimum": 1},
    "allowSelfApproval": _FLAG,
    "channels": _names(items={"type": "string", "pattern": _CHANNEL}),
    "timeoutMinutes": _minutes(),
    "function": _text(f"{_DOTTED}:{_DOTTED}"),
    "tool": _text(NAME),
    "connector": _text(NAME),
    "action": _text(NAME),
    "prompt": _text(),
    "requiresConfidence": _FLAG,
    "workflow": _text(NAME),
    "args": {"type": "object"},
    "reason": _text(),
    "timeoutBehavior": {"type": "string", "enum": [b.value for b in TimeoutBehavior]},
    "onDeny": _NODE_ID,  # a node: a denial cannot jump to end
    "denyReasonRequired": _FLAG,
    "remindBeforeMinutes": _minutes(),
    "escalateAfterMinutes": _minutes(),
    "escalateTo": _names(minItems=1),
}
assert PROPERTIES.keys() == NODE_KEYS, sorted(PROPERTIES.keys() ^ NODE_KEYS)


def _by_type(node_type: NodeType) -> dict[str, Any]:
    """What a node of ``node_type`` must have, and the keys of other types it must not."""
    then: dict[str, Any] = {
        "required": list(REQUIRED_KEYS[node_type]),
        "properties": {key: False for key, types in ONLY_ON.items() if node_type not in types},
    }
    if node_type == NodeType.TOOL:  # a declared tool's name, or its function: one, not both
        then["oneOf"] = [{"required": ["tool"]}, {"required": ["function"]}]
    return {
        "if": {"properties": {"type": {"const": node_type.value}}, "required": ["type"]},
        "then": then,
    }


NODE: dict[str, Any] = {
    "type": "object",
    "properties": PROPERTIES,
    "required": ["id", "type"],
    "additionalProperties": False,
    "dependentRequired": {
        "escalateAfterMinutes": ["escalateTo"],
        "escalateTo": ["escalateAfterMinutes"],
    },
    "allOf": [_by_type(t) for t in NodeType],
}

WORKFLOW_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": _text(NAME),
        "nodes": {"maxItems": MAX_NODES, "type": "array", "items": NODE, "minItems": 1},
    },
    "required": ["name", "nodes"],
    "additionalProperties": False,
}
