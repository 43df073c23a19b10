"""The small protocols through which the engine talks to the outside.

The engine never reads the wall clock, draws a random id, opens a socket or touches a chat SDK
directly: it is handed a ``Clock``, an ``IdSource``, ``Connector``s, a ``Sampler`` (the LLM) and a
``Store``. Tests hand it fakes that they control; replays are deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable


class Clock(Protocol):
    """Where time comes from. ``now()`` is always timezone-aware UTC; ``sleep`` waits on this
    clock's time (a policy's backoff: a test moves a manual clock instead of waiting)."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class IdSource(Protocol):
    def new_id(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ConnectorCall:
    """One side-effecting call, with the idempotency key ``{run_id}:{step_id}:{attempt}``."""

    connector: str
    action: str
    args: Mapping[str, Any]
    idempotency_key: str
    run_id: str | None = None
    step_id: str | None = None
    account: str | None = None
    context: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Connector(Protocol):
    """A named integration. ``call`` performs the action and returns its JSON-able result;
    it raises ``engine.domain.errors.ConnectorError`` (``retryable=True`` for transient
    failures)."""

    async def call(self, call: ConnectorCall) -> Any: ...


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str  # system, user, assistant
    content: str


class Sampler(Protocol):
    """The LLM. ``complete`` returns the assistant's text for one chat-completions request."""

    async def complete(
        self, messages: list[ChatMessage], *, temperature: float = 1.0, max_tokens: int = 256
    ) -> str: ...


class Waker(Protocol):
    """Tells workers (in this process, or in every replica) that a run became ready."""

    async def wake(self) -> None: ...


@dataclass(frozen=True, slots=True)
class GateQuestion:
    """What the confidence gate is asked about one pending step."""

    run_id: str
    workflow: str
    agent: str | None
    step_id: str
    node_type: str
    connector: str | None
    action: str | None
    args: Any
    prior_outputs: Mapping[str, Any]
    requires_confidence: bool
    channels: tuple[str, ...]  # the step's own channels (may be empty)
    approvers: tuple[str, ...]  # the step's own approvers (may be empty)


class StepGate(Protocol):
    """Scores a pending step. Returns None when the step is not gated; otherwise the
    ``confidence_evaluated`` data: ``{score, threshold, decision: "execute"|"divert",
    node_type, estimator, ...}`` plus ``channels``/``approvers`` for a diversion."""

    async def assess(self, question: GateQuestion) -> dict[str, Any] | None: ...
