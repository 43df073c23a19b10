"""What a workflow's nodes reach outside the graph: tools, connectors, child workflows, targets.

Every name must be one the configuration declares. A workflow in ``app.yaml`` is the operator's
(who can already run any code on the host): its `tool` nodes may name a declared tool or a
``module:function`` of their own. A workflow stored through ``POST /v1/workflows`` is an
admin's, and an admin is not a shell user: it may run only the ``tools:`` of ``app.yaml`` (by
name, or by the exact function a tool declares), call only ``connectors:``, post only to
``webhooks:``. Anything else is a problem naming the node's path, and nothing is stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence

from engine.config.connectors import ConnectorConfig
from engine.config.tools import ToolConfig
from engine.config.values import join, suggest
from engine.domain.model import Node, NodeType

__all__ = ["node_reach_problems", "stored_tool_problems", "tool_problems"]


def node_reach_problems(
    node: Node,
    at: str,
    *,
    connectors: Mapping[str, ConnectorConfig],
    tools: Mapping[str, ToolConfig],
    channel_problem: Callable[[str], str | None],
    workflow: str,
    known: Collection[str],
    stored: bool,
) -> list[str]:
    """What ``node`` (at ``at``) names that the configuration lacks; ``stored``: the node is
    part of a workflow from the API, which may name no function of its own; ``channel_problem``:
    why a channel address names an undeclared target (``AppConfig.target_problem``)."""
    problems = _connector_problems(node, at, connectors)
    problems.extend(tool_problems(node, at, tools, stored=stored))
    if node.type == NodeType.WORKFLOW and node.workflow is not None:
        if node.workflow == workflow:
            problems.append(f"{at}.workflow: a workflow cannot start itself")
        elif node.workflow not in known:
            hint = suggest(node.workflow, known, list_all=False)
            problems.append(f"{at}.workflow: unknown workflow {json.dumps(node.workflow)}{hint}")
    for j, channel in enumerate(node.channels):
        if (why := channel_problem(channel)) is not None:
            problems.append(f"{at}.channels[{j}]: {why}")
    return problems


def tool_problems(
    node: Node, at: str, tools: Mapping[str, ToolConfig], *, stored: bool
) -> list[str]:
    """A `tool` node's ``tool`` must be declared; a stored one's ``function`` must be the
    function of a declared tool."""
    if node.type != NodeType.TOOL:
        return []
    declared = ", ".join(sorted(tools)) or "none"
    if node.tool is not None and node.tool not in tools:
        hint = suggest(node.tool, tools, list_all=False)
        return [
            f"{at}.tool: unknown tool {json.dumps(node.tool)}: app.yaml's tools: declares "
            f"{declared}{hint}"
        ]
    if stored and node.function is not None:
        if not any(t.function == node.function for t in tools.values()):
            return [
                f"{at}.function: {json.dumps(node.function)} is not a tool app.yaml declares; "
                f"a stored workflow may run only the tools: of app.yaml ({declared}), named "
                "with tool: <name>"
            ]
    return []


def _connector_problems(
    node: Node, at: str, connectors: Mapping[str, ConnectorConfig]
) -> list[str]:
    if node.type != NodeType.CONNECTOR or node.connector is None:
        return []
    connector = connectors.get(node.connector)
    if connector is None:
        hint = suggest(node.connector, connectors, list_all=False)
        return [f"{at}.connector: unknown connector {json.dumps(node.connector)}{hint}"]
    if node.action not in connector.actions:
        hint = suggest(node.action or "", connector.actions)
        return [
            f"{at}.action: connector {connector.name} has no action {json.dumps(node.action)}{hint}"
        ]
    return []


def stored_tool_problems(
    nodes: Sequence[Node], path: str, tools: Mapping[str, ToolConfig]
) -> list[str]:
    """``tool_problems`` of every node of a stored workflow (nodes at ``path``)."""
    return [
        p for i, n in enumerate(nodes) for p in tool_problems(n, join(path, i), tools, stored=True)
    ]
