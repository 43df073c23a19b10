"""A held call is a one-step run: the synthetic workflow ``call:<connector>.<action>``.

Running a call through the ordinary interpreter gives it everything a workflow step has: the
journal, ``step_started`` before the side effect, the idempotency key ``{run}:call:{attempt}``,
retries, parking on its policy request and replay after a crash.

The one node is a ``connector`` node whose connector is ``call:<connector>``, an adapter
registered beside every real connector. Why the adapter: the interpreter evaluates a node's
``args`` key by key, so a fixed node cannot hand over the agent's argument mapping as it is.
The node evaluates ``{args, account, mode}`` from the run's input instead, and the adapter calls
the real connector with ``args`` (and ``account``, which ordinary nodes do not pass). In
``approve_only`` mode the adapter calls nothing: the approval itself is the outcome, and the
caller runs the action on its side (``bot.client.requires_approval``).
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any, Protocol, TypeVar

from engine.domain.errors import ConnectorError, NotFound
from engine.domain.messages import ConnectorCall
from engine.domain.model import Node, NodeType, Workflow

CALL_PREFIX = "call:"
CALL_STEP = "call"  # the node id of every held call; its journal events carry it
EXECUTE = "execute"
APPROVE_ONLY = "approve_only"
MODES = (EXECUTE, APPROVE_ONLY)


class CallTarget(Protocol):
    """A connector as a ``call:`` name resolves it (``engine.config.ConnectorConfig`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def actions(self) -> Container[str]: ...


Target = TypeVar("Target", bound=CallTarget)


class Connector(Protocol):
    """What a held call is handed: ``engine.ports.Connector`` as the domain sees it (the domain
    imports nothing of the engine, so it states the one method it calls)."""

    async def call(self, call: ConnectorCall) -> Any: ...


def call_workflow_name(connector: str, action: str) -> str:
    return f"{CALL_PREFIX}{connector}.{action}"


def is_call_workflow(name: str) -> bool:
    return name.startswith(CALL_PREFIX)


def resolve_call_target(name: str, connectors: Mapping[str, Target]) -> tuple[Target, str]:
    """The connector and action a ``call:`` workflow name stands for. Names may contain dots,
    so every split is tried; the longest connector name that has the rest as an action wins.
    Raises ``NotFound`` when none does."""
    target = name[len(CALL_PREFIX) :] if is_call_workflow(name) else ""
    for i in range(len(target) - 1, 0, -1):
        if target[i] != ".":
            continue
        connector = connectors.get(target[:i])
        if connector is not None and target[i + 1 :] in connector.actions:
            return connector, target[i + 1 :]
    raise NotFound(f"workflow {name!r} does not exist (no such connector action)", workflow=name)


def call_workflow(name: str, connectors: Mapping[str, CallTarget]) -> Workflow:
    """The one-node workflow of a held call (``NotFound`` for an unknown connector/action)."""
    connector, action = resolve_call_target(name, connectors)
    node = Node(
        id=CALL_STEP,
        type=NodeType.CONNECTOR,
        connector=CALL_PREFIX + connector.name,
        action=action,
        args={
            "args": "{{ input.args }}",
            "account": "{{ input.account }}",
            "mode": "{{ input.mode }}",
        },
    )
    return Workflow(name=name, nodes=(node,))


class HeldCallConnector:
    """``call:<name>``: unwraps a held call's evaluated ``{args, account, mode}`` and calls the
    real connector with the agent's arguments and the step's idempotency key."""

    def __init__(self, name: str, inner: Connector) -> None:
        self.name = name
        self.inner = inner

    async def call(self, call: ConnectorCall) -> Any:
        if call.args.get("mode") == APPROVE_ONLY:
            return None  # approved; the caller performs the action itself
        args = call.args.get("args")
        if not isinstance(args, Mapping):
            raise ConnectorError(f"{self.name}.{call.action}: the call's arguments are missing")
        account = call.args.get("account")
        return await self.inner.call(
            ConnectorCall(
                connector=self.name,
                action=call.action,
                args=dict(args),
                idempotency_key=call.idempotency_key,
                run_id=call.run_id,
                step_id=call.step_id,
                account=account if isinstance(account, str) else None,
                context=call.context,
            )
        )


def held_call_connectors(connectors: Mapping[str, Connector]) -> dict[str, Connector]:
    """A ``call:<name>`` adapter for every connector. Adapters have no ``close``: the registry
    closes the real connectors once."""
    return {CALL_PREFIX + name: HeldCallConnector(name, c) for name, c in connectors.items()}
