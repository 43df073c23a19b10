"""The small protocols through which the engine talks to the outside.

The engine never reads the wall clock, draws a random id, opens a socket or touches a chat SDK
directly: it is handed a ``Clock``, an ``IdSource``, ``Connector``s, a ``Sampler`` (the LLM) and a
``Store``. Tests hand it fakes that they control; replays are deterministic.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, runtime_checkable

# The records the protocols below carry are domain data; importers may keep naming them here.
from engine.domain.messages import ChatMessage as ChatMessage
from engine.domain.messages import ConnectorCall as ConnectorCall
from engine.domain.messages import GateQuestion as GateQuestion


class Clock(Protocol):
    """Where time comes from. ``now()`` is always timezone-aware UTC; ``sleep`` waits on this
    clock's time (a policy's backoff: a test moves a manual clock instead of waiting)."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class IdSource(Protocol):
    def new_id(self) -> str: ...


@runtime_checkable
class Connector(Protocol):
    """A named integration. ``call`` performs the action and returns its JSON-able result;
    it raises ``engine.domain.errors.ConnectorError`` (``retryable=True`` for transient
    failures)."""

    async def call(self, call: ConnectorCall) -> Any: ...


class Sampler(Protocol):
    """The LLM. ``complete`` returns the assistant's text for one chat-completions request."""

    async def complete(
        self, messages: list[ChatMessage], *, temperature: float = 1.0, max_tokens: int = 256
    ) -> str: ...


class Waker(Protocol):
    """Tells workers (in this process, or in every replica) that a run became ready."""

    async def wake(self) -> None: ...


class StepGate(Protocol):
    """Scores a pending step. Returns None when the step is not gated; otherwise the
    ``confidence_evaluated`` data: ``{score, threshold, decision: "execute"|"divert",
    node_type, estimator, ...}`` plus ``channels``/``approvers`` for a diversion."""

    async def assess(self, question: GateQuestion) -> dict[str, Any] | None: ...
