"""The runs' part of the store port: create, claim with a lease, append (fenced), park."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from engine.domain.model import (
    JournalEntry,
    NewEvent,
    OutboxMessage,
    Run,
    RunStatus,
    TakeoverRequest,
)
from engine.domain.records import NewRun, Plan


class RunStore(Protocol):
    async def create_run(
        self,
        new: NewRun,
        now: datetime,
        events: Sequence[NewEvent] = (),
        *,
        outbox: Sequence[OutboxMessage] = (),
        takeover: TakeoverRequest | None = None,
    ) -> tuple[Run, bool]: ...

    async def get_run(self, run_id: str) -> Run: ...

    async def run_and_journal(self, run_id: str) -> tuple[Run, list[JournalEntry]]: ...

    async def claim_runs(
        self,
        owner: str,
        now: datetime,
        lease: timedelta,
        limit: int,
        *,
        read: dict[str, tuple[Run, list[JournalEntry]]] | None = None,
        plan: Plan | None = None,
    ) -> list[str]: ...

    async def renew_leases(self, run_ids: Sequence[str], owner: str, until: datetime) -> int: ...

    async def append_events(
        self,
        run_id: str,
        owner: str,
        events: Sequence[NewEvent],
        now: datetime,
        *,
        error: str | None = None,
        expect: int | None = None,
        finish: RunStatus | None = None,
        open_requests: bool = False,
        outbox: Sequence[OutboxMessage] = (),
        output: Any = None,
        parent_wakeup: tuple[str, NewEvent] | None = None,
    ) -> int: ...

    async def park_run(
        self,
        run_id: str,
        owner: str,
        events: Sequence[NewEvent],
        now: datetime,
        *,
        takeover: TakeoverRequest | None = None,
        child: NewRun | None = None,
        child_events: Sequence[NewEvent] = (),
        outbox: Sequence[OutboxMessage] = (),
    ) -> int: ...

    async def requeue_run(self, run_id: str, owner: str, now: datetime) -> bool: ...
