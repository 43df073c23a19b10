"""What the front ends read: runs, journals, requests, queued messages, the ledger, the queue.

Every page, card and API answer reads through here rather than through the store, so that the
front ends see the few reads they need (``RunReads``) and nothing of how they are stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

from engine.domain.model import (
    JournalEntry,
    OutboxRecord,
    Run,
    RunStatus,
    TakeoverRequest,
    TakeoverStatus,
)
from engine.services.approval_queue import DEFAULT_PAGE, QueueFilter, QueuePage


class RunReads(Protocol):
    """The store's reads these queries make."""

    async def get_run(self, run_id: str) -> Run: ...
    async def list_runs(
        self, *, status: RunStatus | None = None, workflow: str | None = None, limit: int = 100
    ) -> list[Run]: ...
    async def count_runs(self, status: RunStatus) -> int: ...
    async def journal(self, run_id: str) -> list[JournalEntry]: ...
    async def run_and_journal(self, run_id: str) -> tuple[Run, list[JournalEntry]]: ...
    async def run_with_entries_after(
        self, run_id: str, after_seq: int
    ) -> tuple[Run, list[JournalEntry]]: ...
    async def get_takeover(self, request_id: str) -> TakeoverRequest: ...
    async def list_takeovers(
        self,
        *,
        run_id: str | None = None,
        statuses: Sequence[TakeoverStatus] = (),
        limit: int = 200,
    ) -> list[TakeoverRequest]: ...
    async def takeovers_of_runs(
        self, run_ids: Sequence[str]
    ) -> dict[str, list[TakeoverRequest]]: ...
    async def outbox_messages(
        self, *, run_id: str | None = None, status: str | None = None, limit: int = 1000
    ) -> list[tuple[OutboxRecord, str, str | None]]: ...
    async def ledger(
        self, *, run_id: str | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]: ...
    async def schema_revision(self) -> str | None: ...


class QueueReader(Protocol):
    """``engine.services.approval_queue.approval_queue`` on the engine's store."""

    def __call__(
        self, where: QueueFilter | None = None, *, limit: int, cursor: str | None
    ) -> Awaitable[QueuePage]: ...


class Queries:
    """The reads of the API, the console, the approval page and the chat front ends."""

    def __init__(self, store: RunReads, queue: QueueReader) -> None:
        self._store = store
        self._queue = queue

    async def get_run(self, run_id: str) -> Run:
        """The run (``NotFound`` when there is none)."""
        return await self._store.get_run(run_id)

    async def list_runs(
        self, *, status: RunStatus | None = None, workflow: str | None = None, limit: int = 100
    ) -> list[Run]:
        return await self._store.list_runs(status=status, workflow=workflow, limit=limit)

    async def count_runs(self, status: RunStatus) -> int:
        return await self._store.count_runs(status)

    async def journal(self, run_id: str) -> list[JournalEntry]:
        return await self._store.journal(run_id)

    async def run_and_journal(self, run_id: str) -> tuple[Run, list[JournalEntry]]:
        """The run and its journal read together (one consistent picture for a page)."""
        return await self._store.run_and_journal(run_id)

    async def run_with_entries_after(
        self, run_id: str, after_seq: int
    ) -> tuple[Run, list[JournalEntry]]:
        """The run and the journal entries after ``after_seq`` (the live timeline's poll)."""
        return await self._store.run_with_entries_after(run_id, after_seq)

    async def get_takeover(self, request_id: str) -> TakeoverRequest:
        """The request (``NotFound`` when there is none)."""
        return await self._store.get_takeover(request_id)

    async def list_takeovers(
        self,
        *,
        run_id: str | None = None,
        statuses: Sequence[TakeoverStatus] = (),
        limit: int = 200,
    ) -> list[TakeoverRequest]:
        return await self._store.list_takeovers(run_id=run_id, statuses=statuses, limit=limit)

    async def takeovers_of_runs(self, run_ids: Sequence[str]) -> dict[str, list[TakeoverRequest]]:
        """The requests of each run, in one read (the console's runs page)."""
        return await self._store.takeovers_of_runs(run_ids)

    async def outbox_messages(
        self, *, run_id: str | None = None, status: str | None = None, limit: int = 1000
    ) -> list[tuple[OutboxRecord, str, str | None]]:
        """Queued chat messages with their status and last error."""
        return await self._store.outbox_messages(run_id=run_id, status=status, limit=limit)

    async def ledger(self, *, run_id: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        """The demo ledger's calls, oldest first."""
        return await self._store.ledger(run_id=run_id, limit=limit)

    async def schema_revision(self) -> str | None:
        """The database's migration revision (None: never migrated); raises when unreachable."""
        return await self._store.schema_revision()

    async def approval_queue(
        self, where: QueueFilter | None = None, *, limit: int = DEFAULT_PAGE, cursor: str | None
    ) -> QueuePage:
        """One page of the operators' queue (``engine.services.approval_queue``)."""
        return await self._queue(where, limit=limit, cursor=cursor)
