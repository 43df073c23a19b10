"""What a loaded workflow graph means: which nodes can follow a node.

Workflows are read and validated from YAML/JSON by ``engine.config.workflows``; the records are
``engine.domain.model``'s ``Workflow`` and ``Node``.
"""

from __future__ import annotations

from engine.domain.model import Node, Workflow

__all__ = ["successors"]


def successors(workflow: Workflow, node: Node) -> tuple[str, ...]:
    """Every node id that can run right after ``node``: its successor, then its deny path."""
    after = workflow.successor(node)
    edges = () if after is None else (after.id,)
    return edges + ((node.on_deny,) if node.on_deny else ())
