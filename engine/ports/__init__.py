"""The small protocols through which the engine talks to the outside.

The engine never reads the wall clock, draws a random id, opens a socket or touches a chat SDK
directly: it is handed a ``Clock``, an ``IdSource``, ``Connector``s, a ``Sampler`` (the LLM) and a
``Store``. Tests hand it fakes that they control; replays are deterministic.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable


class Clock(Protocol):
    """Where time comes from. ``now()`` is always timezone-aware UTC; ``sleep`` waits on this
    clock's time (a policy's backoff: a test moves a manual clock instead of waiting)."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The wall clock, optionally corrected by an offset (e.g. to follow the database clock)."""

    def __init__(self, offset: timedelta = timedelta(0)) -> None:
        self.offset = offset

    def now(self) -> datetime:
        now = datetime.now(UTC)
        return now + self.offset if self.offset else now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """A clock that moves only when told to: tests advance time instead of sleeping. ``sleep``
    returns once ``advance`` or ``set`` has moved the clock to its deadline or past it."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._now

    def advance(self, **delta: float) -> datetime:
        self._now += timedelta(**delta)
        self._wake_due()
        return self._now

    def set(self, when: datetime) -> None:
        self._now = when
        self._wake_due()

    async def sleep(self, seconds: float) -> None:
        deadline = self._now + timedelta(seconds=seconds)
        if seconds <= 0:
            await asyncio.sleep(0)  # a zero sleep still yields, as asyncio's does
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((deadline, waiter))
        try:
            await waiter
        finally:
            self._sleepers = [(d, w) for d, w in self._sleepers if w is not waiter]

    @property
    def sleepers(self) -> list[float]:
        """The seconds each pending ``sleep`` has still to wait, soonest first (tests wait
        for a sleeper to appear, then advance the clock by what it asked)."""
        return sorted((d - self._now).total_seconds() for d, _ in self._sleepers)

    def _wake_due(self) -> None:
        for deadline, waiter in self._sleepers:
            if deadline <= self._now and not waiter.done():
                waiter.set_result(None)


class IdSource(Protocol):
    def new_id(self) -> str: ...


class UuidSource:
    """Time-ordered random UUIDs (version 7, RFC 9562): 48 bits of Unix milliseconds, then 74
    random bits. Ids made close in time sort close together, so the primary-key and foreign-key
    indexes on runs, the journal and requests grow at their right edge: a commit dirties a few
    pages, not one random page per index, and a run's rows stay near each other as the
    database grows. An id tells when it was made, to the millisecond; its random bits keep
    it unguessable. Spelled as ``str(uuid.UUID(...))`` spells it."""

    _BATCH = 64  # ids' worth of random bytes read at once

    def __init__(self) -> None:
        # Random bytes are read from the system for 64 ids at a time: a read is a system call,
        # and an engine thread that makes one gives up the GIL and waits to get it back from
        # the SQLite writer thread (measured: 4 % of the event loop's time while parking).
        self._random = b""
        self._lock = threading.Lock()
        _SOURCES.add(self)

    def new_id(self) -> str:
        with self._lock:
            if not self._random:
                self._random = os.urandom(10 * self._BATCH)
            bits, self._random = self._random[:10], self._random[10:]
        h = f"{time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF:012x}{bits.hex()}"
        variant = "89ab"[int(h[16], 16) & 3]  # RFC 9562: the top two bits are 10
        return f"{h[:8]}-{h[8:12]}-7{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


_SOURCES: weakref.WeakSet[UuidSource] = weakref.WeakSet()


def _forget_random_bytes() -> None:
    """In a forked child: bytes read before the fork would give the parent's ids again."""
    for source in list(_SOURCES):
        source._random = b""


os.register_at_fork(after_in_child=_forget_random_bytes)


class SequentialIds:
    """Predictable ids for tests and golden journals: ``<prefix>-000001`` ..."""

    def __init__(self, prefix: str = "id") -> None:
        self.prefix = prefix
        self.count = 0

    def new_id(self) -> str:
        self.count += 1
        return f"{self.prefix}-{self.count:06d}"


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
