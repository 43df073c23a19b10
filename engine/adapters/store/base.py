"""Shared pieces of the SQL store: the database its mixins share, the dialect's INSERT that
ignores a duplicate key, and queuing outbox messages in the caller's transaction. Rows become
records in ``rows``; the fenced journal append is ``journal``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, String, any_, bindparam
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.db import OUTBOX_READY, Database, mark_ready
from engine.adapters.store.fast import Fast
from engine.domain.model import OutboxMessage
from engine.domain.outbox import OutboxStatus

T = TypeVar("T")

_IGNORING: dict[tuple[str, str, tuple[str, ...]], Any] = {}
_FAST_IGNORING: dict[tuple[str, str, tuple[str, ...]], Fast] = {}


class StoreBase:
    """Holds the database; the mixins of ``SqlStore`` add the operations."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def insert_ignore_on(self, table: Any, *keys: str) -> Any:
        """``INSERT ... ON CONFLICT (keys) DO NOTHING``, built once per table and dialect."""
        cache_key = (self.db.dialect, table.name, keys)
        stmt = _IGNORING.get(cache_key)
        if stmt is None:
            stmt = _IGNORING[cache_key] = self.insert_ignore(table).on_conflict_do_nothing(
                index_elements=list(keys)
            )
        return stmt

    def fast_insert_ignore_on(self, table: Any, *keys: str) -> Fast:
        """``insert_ignore_on`` for the hot path (``engine.adapters.store.fast``)."""
        cache_key = (self.db.dialect, table.name, keys)
        fast = _FAST_IGNORING.get(cache_key)
        if fast is None:
            fast = _FAST_IGNORING[cache_key] = Fast(self.insert_ignore_on(table, *keys))
        return fast

    def one_of(self, column: Any, values: Sequence[str]) -> ColumnElement[bool]:
        """``column IN values``; on PostgreSQL ``= ANY(array)``: one bound parameter, so one
        prepared statement and plan whatever the number of values."""
        if self.db.is_sqlite:
            matches: ColumnElement[bool] = column.in_(list(values))
        else:
            array = bindparam(None, list(values), type_=postgresql.ARRAY(String()))
            matches = column == any_(array)
        return matches

    async def nothing_to_claim(self, probe: Fast, params: Mapping[str, Any]) -> bool:
        """On SQLite, whether a claim would find nothing (``probe``: a SELECT of the claimable
        rows), asked with a read on the caller's thread rather than a write queued for the one
        writer. PostgreSQL claims in one round trip: there the claim is always made."""
        if not self.db.is_sqlite:
            return False

        def work(conn: Connection) -> bool:
            return probe(conn, params).first() is None

        return await self.db.transact(work, write=False)

    async def first_row(self, query: Any, record: Callable[[Any], T]) -> T | None:
        """The first row ``query`` reads, as ``record`` makes it from the row's mapping; None
        when it reads none. One read-only transaction."""

        def work(conn: Connection) -> T | None:
            row = conn.execute(query).mappings().first()
            return None if row is None else record(row)

        return await self.db.transact(work, write=False)

    def insert_ignore(self, table: Any) -> Any:
        """An INSERT that does nothing when a unique key already exists."""
        dialect_insert = sqlite.insert if self.db.is_sqlite else postgresql.insert
        return dialect_insert(table)


def insert_outbox(
    conn: Connection, store: StoreBase, messages: Sequence[OutboxMessage], now: datetime
) -> None:
    """Queue chat messages in the caller's transaction; a dedupe key seen before is skipped."""
    if not messages:
        return
    mark_ready(conn, OUTBOX_READY)
    store.fast_insert_ignore_on(t.outbox, "dedupe_key")(
        conn,
        [
            {
                "dedupe_key": m.dedupe_key,
                "channel": m.channel,
                "kind": m.kind,
                "run_id": m.run_id,
                "request_id": m.request_id,
                "payload": m.payload,
                "status": OutboxStatus.PENDING.value,
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
            }
            for m in messages
        ],
    )
