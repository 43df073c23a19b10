"""Cycles in a workflow's graph, each reported at the backward edge that closes it."""

from __future__ import annotations

import itertools

from engine.config.values import join
from engine.domain.model import Node, Workflow
from engine.domain.workflows import successors

__all__ = ["cycle_problems"]


def cycle_problems(nodes: list[Node], path: str) -> list[str]:
    """One problem per cycle, reported at the backward edge (``next``/``onDeny``) closing it."""
    graph = Workflow(name="-", nodes=tuple(nodes))
    position = {n.id: i for i, n in enumerate(nodes)}
    found: list[str] = []
    seen_cycles: set[frozenset[str]] = set()
    state: dict[str, int] = {}  # 1: on the DFS stack, 2: done
    stack: list[str] = []

    def visit(node_id: str) -> None:
        state[node_id] = 1
        stack.append(node_id)
        node = graph.nodes[position[node_id]]
        for target in successors(graph, node):
            if state.get(target) == 1:
                cycle = [*stack[stack.index(target) :], target]
                if frozenset(cycle) not in seen_cycles:
                    seen_cycles.add(frozenset(cycle))
                    found.append(_describe_cycle(cycle, graph, position, path))
            elif target not in state:
                visit(target)
        stack.pop()
        state[node_id] = 2

    for node in nodes:
        if node.id not in state:
            visit(node.id)
    return found


def _describe_cycle(
    cycle: list[str],
    graph: Workflow,
    position: dict[str, int],
    path: str,
) -> str:
    # A cycle needs an edge back to an earlier (or the same) node; list order only goes forward,
    # so that edge is an explicit ``next`` or ``onDeny``: point at it.
    for src, dst in itertools.pairwise(cycle):
        if position[dst] <= position[src]:
            node = graph.nodes[position[src]]
            key = "next" if node.next == dst else "onDeny"
            at = join(path, position[src])
            return f"{at}.{key}: creates a cycle: {' -> '.join(cycle)}"
    return f"{path}: cycle: {' -> '.join(cycle)}"  # pragma: no cover - unreachable
