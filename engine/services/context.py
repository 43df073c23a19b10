"""What the interpreter needs from the outside, injected at startup."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engine.domain.model import Node, Workflow
from engine.ports import Clock, IdSource, Sampler, StepGate
from engine.ports.store import Store
from engine.services.connectors import ConnectorRegistry


class WorkflowLookup(Protocol):
    """Finds a workflow by name; implemented by
    ``engine.services.workflow_source.WorkflowSource``."""

    async def get(self, name: str) -> Workflow: ...

    def fixed(self, name: str) -> Workflow | None:
        """The workflow when it cannot change while the process runs (``app.yaml``'s), else
        None."""


@dataclass
class Services:
    """What the interpreter needs from the outside, injected at startup."""

    store: Store
    workflows: WorkflowLookup
    connectors: ConnectorRegistry
    clock: Clock
    ids: IdSource
    expand_people: Callable[[Sequence[str]], tuple[str, ...]]
    # Runs a `tool` node's callable with the node's arguments, off the loop and under its time
    # limit (an adapter's work: ``engine.adapters.connectors.python_callable.PythonTools``,
    # handed in by assembly).
    call_python: Callable[[Node, dict[str, Any]], Awaitable[Any]]
    default_approvers: tuple[str, ...] = ()  # app.yaml `approvers:`: a node naming nobody
    # (channels, the request's approvers as people, person away -> delegate) -> one address
    # per person for addresses to people (``engine.config.channels.expand_channels``:
    # ``slack:dm``, ``slack:@group``, and the delegate of someone away after them).
    expand_channels: Callable[
        [Sequence[str], Sequence[str], Mapping[str, str] | None], tuple[str, ...]
    ] = lambda channels, _, __: tuple(channels)
    # (channels after expansion, who started the run) -> where they are told the outcome
    # (``engine.config.channels.requester``): the person who asked, in their words.
    requester_channels: Callable[[Sequence[str], str | None], tuple[str, ...]] = (
        lambda channels, who: ()
    )
    sampler: Sampler | None = None
    gate: StepGate | None = None
    wake: Callable[[], None] = lambda: None  # runs became ready
    wake_outbox: Callable[[], None] = lambda: None  # chat messages were queued
    stopping: Callable[[], bool] = lambda: False  # the process is shutting down
    # How long a worker keeps trying to commit while the database is unreachable: its lease
    # (``server.leaseSeconds``); after that another worker may hold the run.
    lease_seconds: float = 30.0
    # A connector action declared ``kind: read``: no side effect, so its ``step_started`` is
    # committed with its result rather than before the call (a crash repeats a read, harmless).
    reads_only: Callable[[Node], bool] = lambda node: False
