"""Workflow definitions: camelCase YAML/JSON node lists into validated ``Workflow`` graphs.

The same format arrives from ``app.yaml`` (``workflows: {name: {nodes: [...]}}``) and from
``POST /v1/workflows`` (``{name, nodes}``). Validation reports every problem, each line starting
with the path of the bad value (``workflows.refund.nodes[2].timeoutMinutes: must be 1..1440,
got 2000``). What nodes name outside the graph (tools, connectors, people, webhooks, child
workflows) is checked by ``engine.config.reach`` and ``AppConfig.workflow_problems``.

The parsing lives in ``engine.config`` beside the readers it shares with ``app.yaml``: those are
loading helpers, not rules, so the domain keeps only what a loaded graph means
(``engine.domain.workflows``) and never imports the loader.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from engine.config.channels import check_channel
from engine.config.cycles import cycle_problems
from engine.config.values import (
    CALLABLE_RE,
    NAME_RE,
    Section,
    join,
    json_problem,
    plain,
    type_name,
)
from engine.domain.errors import ConfigError
from engine.domain.expressions import check_template
from engine.domain.model import END, Node, NodeType, TimeoutBehavior, Workflow

__all__ = ["check_channel", "load_workflow", "parse_workflow", "sound_nodes"]

NODE_ID = r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}"
NODE_ID_RE = re.compile(NODE_ID + r"\Z")
MAX_MINUTES = 1440  # timeoutMinutes, remindBeforeMinutes, escalateAfterMinutes: at most a day
DEFAULT_REASON = "Approval required"

_APPROVAL = frozenset({NodeType.APPROVAL})
_ARGS_TYPES = frozenset({NodeType.TOOL, NodeType.CONNECTOR, NodeType.AI_STEP, NodeType.WORKFLOW})
# Keys that only make sense on some node types. ``channels``, ``approvers``,
# ``approvalsRequired``, ``allowSelfApproval`` and ``timeoutMinutes`` are absent on purpose: a
# confidence-gate diversion of any step uses them.
ONLY_ON: dict[str, frozenset[NodeType]] = {
    "function": frozenset({NodeType.TOOL}),
    "tool": frozenset({NodeType.TOOL}),
    "connector": frozenset({NodeType.CONNECTOR}),
    "action": frozenset({NodeType.CONNECTOR}),
    "prompt": frozenset({NodeType.AI_STEP}),
    "requiresConfidence": frozenset({NodeType.AI_STEP}),
    "workflow": frozenset({NodeType.WORKFLOW}),
    "args": _ARGS_TYPES,
    "reason": _APPROVAL,
    "timeoutBehavior": _APPROVAL,
    "onDeny": _APPROVAL,
    "denyReasonRequired": _APPROVAL,
    "remindBeforeMinutes": _APPROVAL,
    "escalateAfterMinutes": _APPROVAL,
    "escalateTo": _APPROVAL,
}
NODE_KEYS = frozenset(
    {"id", "type", "next", "approvers", "approvalsRequired", "allowSelfApproval", "channels"}
    | {"timeoutMinutes"}
    | ONLY_ON.keys()
)
REQUIRED_KEYS: dict[NodeType, tuple[str, ...]] = {
    NodeType.TOOL: (),  # tool or function: checked with them
    NodeType.CONNECTOR: ("connector", "action"),
    NodeType.AI_STEP: ("prompt",),
    NodeType.WORKFLOW: ("workflow",),
    NodeType.APPROVAL: (),
}

Expand = Callable[[Sequence[str]], Sequence[str]]


def load_workflow(name: str, raw: Any, path: str = "", *, expand: Expand | None = None) -> Workflow:
    """Like ``parse_workflow``, raising ``ConfigError`` with every problem."""
    workflow, problems = parse_workflow(name, raw, path, expand=expand)
    if workflow is None:
        raise ConfigError(problems)
    return workflow


def parse_workflow(
    name: str, raw: Any, path: str = "", *, expand: Expand | None = None
) -> tuple[Workflow | None, list[str]]:
    """Validate one workflow; returns ``(workflow, [])`` or ``(None, problems)``.

    ``raw`` is either the node list (``path`` is then the list's path, e.g. ``"nodes"`` for an
    API body) or a mapping ``{nodes: [...]}`` at ``path`` (``"workflows.refund"`` in
    ``app.yaml``; ``""`` for a whole ``{name, nodes}`` API body). ``expand`` turns approver
    names into people (groups expanded) to check ``approvalsRequired``; without it the names are
    counted as given.
    """
    problems: list[str] = []
    if isinstance(raw, list):
        nodes_raw: Any = raw
        nodes_path = path or "nodes"
        name_path = "name"
    else:
        body = Section(raw, path, problems, ("nodes", "name"))
        if body.has("name") and body.raw("name") != name:
            body.error("name", f"does not match the workflow name {json.dumps(name)}")
        nodes_raw = body.data.get("nodes") if body.valid else []
        nodes_path = join(path, "nodes")
        name_path = path or "name"
    if not isinstance(name, str) or not NAME_RE.match(name):
        problems.append(
            f"{name_path}: invalid workflow name {json.dumps(name)} (letters, digits, _ . -; "
            "starting with a letter or digit; at most 100 characters)"
        )
    nodes = _parse_nodes(nodes_raw, nodes_path, problems, expand)
    if problems:
        return None, problems
    return Workflow(name=name, nodes=tuple(nodes)), []


def sound_nodes(raw: Any, path: str, *, expand: Expand | None = None) -> list[tuple[str, Node]]:
    """The nodes of an ``app.yaml`` workflow (``{nodes: [...]}`` at ``path``) that parse on their
    own, each with its path, for a workflow ``parse_workflow`` refused: what they name can still
    be checked against the configuration, so one bad node does not hide the rest's problems."""
    nodes_raw = raw.get("nodes") if isinstance(raw, dict) else None
    if not isinstance(nodes_raw, list):
        return []
    found: list[tuple[str, Node]] = []
    for i, item in enumerate(nodes_raw):
        at = join(join(path, "nodes"), i)
        if (node := _parse_node(item, at, [], expand)) is not None:
            found.append((at, node))
    return found


def _parse_nodes(raw: Any, path: str, problems: list[str], expand: Expand | None) -> list[Node]:
    if raw is None:
        problems.append(f"{path}: required")
        return []
    if not isinstance(raw, list):
        problems.append(f"{path}: must be a list of nodes, got {type_name(raw)}")
        return []
    if not raw:
        problems.append(f"{path}: must have at least one node")
        return []
    nodes: list[Node] = []
    first_at: dict[str, int] = {}
    edges: list[tuple[str, str, str]] = []  # (path, key, target id)
    for i, item in enumerate(raw):
        at = join(path, i)
        node = _parse_node(item, at, problems, expand)
        node_id = item.get("id") if isinstance(item, dict) else None
        if isinstance(node_id, str) and node_id:
            if node_id in first_at:
                problems.append(
                    f"{at}.id: duplicate id {json.dumps(node_id)} "
                    f"(first at {join(path, first_at[node_id])})"
                )
            else:
                first_at[node_id] = i
        if isinstance(item, dict):
            edges.extend(
                (at, key, item[key])
                for key in ("next", "onDeny")
                if isinstance(item.get(key), str) and item[key] and item[key] != END
            )
        if node is not None:
            nodes.append(node)
    dangling = [(at, key, target) for at, key, target in edges if target not in first_at]
    for at, key, target in dangling:
        hint = difflib.get_close_matches(target, list(first_at), n=1)
        tail = f" (did you mean {hint[0]}?)" if hint else ""
        problems.append(f"{at}.{key}: no node has id {json.dumps(target)}{tail}")
    if len(nodes) == len(raw) == len(first_at) and not dangling:
        problems.extend(cycle_problems(nodes, path))
    return nodes


def _parse_node(raw: Any, path: str, problems: list[str], expand: Expand | None) -> Node | None:
    before = len(problems)
    s = Section(raw, path, problems, NODE_KEYS)
    if not s.valid:
        return None
    if raw is None:
        problems.append(f"{path}: must be a mapping, got null")
        return None

    node_id = s.text("id", required=True)
    if node_id is not None and node_id == END:
        s.error("id", f'"{END}" is reserved (it is the value of next that ends a run)')
    elif node_id is not None and not NODE_ID_RE.match(node_id):
        s.error(
            "id",
            f"invalid id {json.dumps(node_id)} (letters, digits, _ and -; starting with a "
            "letter or digit; at most 100 characters)",
        )
    node_type: NodeType | None = None
    type_text = s.text("type", required=True)
    if type_text:
        try:
            node_type = NodeType(type_text)
        except ValueError:
            close = difflib.get_close_matches(type_text, [t.value for t in NodeType], n=1)
            hint = f"did you mean {close[0]}?" if close else "expected one of: "
            hint += "" if close else ", ".join(t.value for t in NodeType)
            s.error("type", f"unknown node type {json.dumps(type_text)} ({hint})")
    if node_type is not None:
        for key, value in s.data.items():
            allowed = ONLY_ON.get(key)
            if value is None:
                continue
            if allowed is not None and node_type not in allowed:
                kinds = " or ".join(sorted(t.value for t in allowed))
                s.error(key, f"only valid on {kinds} nodes, not on {node_type.value} nodes")
        for key in REQUIRED_KEYS[node_type]:
            if s.data.get(key) is None:
                s.error(key, f"required for {node_type.value} nodes")

    function, tool = _name(s, "function"), _name(s, "tool")
    if function is not None and not CALLABLE_RE.match(function):
        s.error("function", f'must look like "module.path:function", got {json.dumps(function)}')
    if tool is not None and function is not None:
        s.error("function", "a tool node names either tool or function, not both")
    elif node_type == NodeType.TOOL and not (s.has("tool") or s.has("function")):
        s.error("tool", "required for tool nodes: the name of a tool app.yaml's tools: declares")
    connector, action = _name(s, "connector"), _name(s, "action")
    prompt, workflow = _name(s, "prompt"), _name(s, "workflow")
    if workflow is not None and not NAME_RE.match(workflow):
        s.error("workflow", f"invalid workflow name {json.dumps(workflow)}")
    next_id = _name(s, "next")
    on_deny = _name(s, "onDeny")
    if on_deny == END:
        s.error("onDeny", "must name a node (a denial cannot jump to end)")
    args = _parse_args(s)
    reason = _name(s, "reason")
    for key, text in (("reason", reason), ("prompt", prompt)):
        _check_expressions(text, s.at(key), problems)
    if reason is None and node_type == NodeType.APPROVAL:
        reason = DEFAULT_REASON

    timeout = s.integer("timeoutMinutes", 30, 1, MAX_MINUTES) or 30
    behavior = s.choice("timeoutBehavior", None, [b.value for b in TimeoutBehavior])
    approvers = _unique(s, "approvers")
    required = s.integer("approvalsRequired", 1, 1) or 1
    if approvers and "approvalsRequired" in s.data:
        people = tuple(dict.fromkeys(expand(approvers))) if expand else approvers
        if required > len(people):
            s.error(
                "approvalsRequired",
                f"is {required} but the approvers are only {len(people)} "
                f"{'person' if len(people) == 1 else 'people'}",
            )
    channels = _unique(s, "channels")
    for i, channel in enumerate(channels):
        if (why := check_channel(channel)) is not None:
            problems.append(f"{join(s.at('channels'), i)}: {why}")
    remind = s.integer("remindBeforeMinutes", None, 1, MAX_MINUTES)
    if remind is not None and remind >= timeout:
        s.error("remindBeforeMinutes", f"must be less than timeoutMinutes ({timeout})")
    escalate_after = s.integer("escalateAfterMinutes", None, 1, MAX_MINUTES)
    if escalate_after is not None and escalate_after >= timeout:
        s.error("escalateAfterMinutes", f"must be less than timeoutMinutes ({timeout})")
    escalate_to = _unique(s, "escalateTo")
    if escalate_after is not None and not escalate_to:
        s.error("escalateTo", "required when escalateAfterMinutes is set")
    if escalate_to and "escalateAfterMinutes" not in s.data:
        s.error("escalateAfterMinutes", "required when escalateTo is set")

    flags = {
        key: bool(s.flag(key, False))
        for key in ("requiresConfidence", "allowSelfApproval", "denyReasonRequired")
    }
    if len(problems) > before or node_id is None or node_type is None:
        return None
    return Node(
        id=node_id,
        type=node_type,
        next=next_id,
        args=args,
        connector=connector,
        action=action,
        function=function,
        tool=tool,
        workflow=workflow,
        prompt=prompt,
        requires_confidence=flags["requiresConfidence"],
        reason=reason,
        timeout_minutes=timeout,
        timeout_behavior=TimeoutBehavior(behavior or TimeoutBehavior.AUTO_REJECT),
        approvers=approvers,
        approvals_required=required,
        allow_self_approval=flags["allowSelfApproval"],
        channels=channels,
        on_deny=on_deny,
        deny_reason_required=flags["denyReasonRequired"],
        remind_before_minutes=remind,
        escalate_after_minutes=escalate_after,
        escalate_to=escalate_to,
    )


def _parse_args(s: Section) -> dict[str, Any]:
    raw = s.data.get("args")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        s.error("args", f"must be a mapping, got {type_name(raw)}")
        return {}
    if (why := json_problem(raw, s.at("args"))) is not None:
        s.problems.append(why)
        return {}
    args: dict[str, Any] = plain(raw)
    _check_expressions(args, s.at("args"), s.problems)
    return args


def _check_expressions(value: Any, path: str, problems: list[str]) -> None:
    """Every template text inside ``value``: its syntax, and the expression limits that show
    without running it (``engine.domain.expressions.check_template``)."""
    if isinstance(value, str):
        if (why := check_template(value)) is not None:
            problems.append(f"{path}: {why}")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_expressions(item, join(path, key), problems)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_expressions(item, join(path, i), problems)


def _unique(s: Section, key: str) -> tuple[str, ...]:
    values = s.texts(key)
    for i, value in enumerate(values):
        if value in values[:i]:
            s.problems.append(f"{join(s.at(key), i)}: duplicate {json.dumps(value)}")
    return tuple(dict.fromkeys(values))


def _name(s: Section, key: str) -> str | None:
    """An optional non-empty string (requiredness per node type is checked separately)."""
    value = s.text(key)
    if value == "":
        s.error(key, "must not be empty")
        return None
    return value
