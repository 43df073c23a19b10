"""One database handle for SQLite (embedded default) and PostgreSQL (replicas), from one URL.

Every unit of work is a function run by ``Database.transact`` in one transaction; the whole
function is retried when the database says "try again" (SQLite busy, PostgreSQL serialization
failure or dropped connection), so a transaction is applied whole or reported, never half.

Units of work are plain (synchronous) functions of a SQLAlchemy ``Connection``:

- SQLite: they run with the standard ``sqlite3`` driver. Writes go to one writer thread
  (SQLite has one writer anyway) with ``BEGIN IMMEDIATE``; when several are queued, the writer
  runs them in one transaction, each in its own SAVEPOINT (one unit's error rolls back that unit
  alone), and reports every result only after the shared COMMIT: group commit, one fsync for
  many decisions. A write that finds the writer idle (nothing queued, no group committing)
  and its event loop with nothing else ready to run commits on the caller's thread instead,
  skipping the two thread hops, most of a lone write's latency; that connection never waits
  for SQLite's lock (another process holding it sends the unit to the writer), so the event
  loop is never blocked on a lock.
  Reads run on the loop's thread: a WAL read never waits for a lock and costs
  tens of microseconds, less than a hop to another thread.
  This departs from the design card's aiosqlite, which hops to its thread once per statement:
  measured here, a one-statement transaction cost 1 ms through aiosqlite and SQLAlchemy's async
  layer, and 0.05 ms this way. (Alembic still uses aiosqlite.)
- PostgreSQL: they run through asyncpg with ``AsyncConnection.run_sync``.

A coroutine function is accepted too (``async def work(conn: AsyncConnection)``) and runs on the
async engine; new code should write plain functions.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from engine.adapters.store.sqlite_writer import (
    QUEUED,
    READY_INFO,
    WRITE_OPTION,
    Held,
    Writer,
    configure_sqlite,
    in_transaction,
    is_busy,
    loop_has_work,
)
from engine.domain.errors import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")

_OUTAGE_FIRST_DELAY, _OUTAGE_MAX_DELAY = 0.1, 1.0  # outlast_outage's backoff, seconds
Work = Callable[[Connection], T]

READY_CHANNEL = "signoff_ready"
RUNS_READY, OUTBOX_READY = "runs", "outbox"
"""What a notification says is ready (its payload, comma-separated): each wakes only the
loop that takes it (workers claim runs, dispatchers claim chat messages)."""
_NOTIFY = text(f"SELECT pg_notify('{READY_CHANNEL}', :payload)")

# PostgreSQL SQLSTATEs worth retrying: serialization failure, deadlock, connection failures.
_PG_RETRY_STATES = {"40001", "40P01", "08000", "08003", "08006", "57P01", "57P02", "57P03"}


class Database:
    """The engines plus the rules for running transactions on them."""

    def __init__(self, url: str, *, echo: bool = False, pool_size: int = 24) -> None:
        self.url = url
        self.dialect = "sqlite" if url.startswith("sqlite") else "postgresql"
        self._echo = echo
        self._async_engine: AsyncEngine | None = None
        self._write_lock = asyncio.Lock() if self.dialect == "sqlite" else None
        if self.dialect == "sqlite":
            sync_url = make_url(url).set(drivername="sqlite")
            self.sync_engine: Engine | None = create_engine(
                sync_url,
                echo=echo,
                pool_size=4,
                max_overflow=2,
                # Every transaction ends in an explicit COMMIT or ROLLBACK.
                pool_reset_on_return=None,
                connect_args={"check_same_thread": False},
            )
            configure_sqlite(self.sync_engine, through_driver=True)
            self._writer: Writer | None = Writer(self.sync_engine)
            # Reads run on the caller's thread, each thread on a connection of its own that it
            # keeps: a pool checkout and return cost more than the read itself.
            self._readers = Held(self.sync_engine)
        else:
            self.sync_engine = None
            self._writer = None
            # No pre-ping: it would cost a round trip per transaction. A connection found dead
            # in use is invalidated and the whole transaction retried (``transact``). The pool
            # keeps every connection it opens, up to ``pool_size``, and past that a transaction
            # waits for one. No overflow: an overflow connection is closed as soon as it is
            # returned, and under load that meant a backend forked, its caches filled and every
            # statement prepared again several times a second (bench/replicas.py: 2.4 ms more
            # CPU per decision with 2 replicas).
            self._async_engine = create_async_engine(
                url, echo=echo, pool_size=pool_size, max_overflow=0
            )

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @property
    def engine(self) -> AsyncEngine:
        """The async engine (PostgreSQL's only engine; on SQLite, for Alembic and tools)."""
        if self._async_engine is None:
            self._async_engine = create_async_engine(
                self.url,
                echo=self._echo,
                pool_size=2,
                max_overflow=2,
                pool_reset_on_return=None,
            )
            configure_sqlite(self._async_engine.sync_engine, through_driver=False)
        return self._async_engine

    def writing_engine(self) -> AsyncEngine:
        """``engine`` for a library that runs its own transactions here (slack_sdk's Slack
        stores): on SQLite each of them begins IMMEDIATE, since they read and then write in one
        transaction, and a deferred one cannot take the write lock once another connection has
        written since its read (SQLITE_BUSY at once, whatever busy_timeout says)."""
        return self.engine.execution_options(**{WRITE_OPTION: True})

    async def transact(
        self,
        work: Callable[[Connection], T] | Callable[[AsyncConnection], Awaitable[T]],
        *,
        write: bool = True,
        attempts: int = 5,
    ) -> T:
        """Run ``work`` in one transaction and commit it; retry the whole of it on transient
        database errors. ``work`` must be safe to run again (nothing outside the transaction
        happens inside it)."""
        delay = 0.02
        for attempt in range(1, attempts + 1):
            try:
                result: T = await self._once(work, write)
                return result
            except DBAPIError as exc:
                if attempt == attempts or not self._is_transient(exc):
                    raise StoreError(f"database error: {_short(exc)}") from exc
                log.warning("transient database error (attempt %d): %s", attempt, _short(exc))
            except OSError as exc:  # connection refused / reset before the driver wrapped it
                if attempt == attempts:
                    raise StoreError(f"database unreachable: {exc}") from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")

    async def _once(self, work: Any, write: bool) -> Any:
        if inspect.iscoroutinefunction(work):
            if write and self._write_lock is not None:
                async with self._write_lock:
                    return await self._run_async(work, write)
            return await self._run_async(work, write)
        if self.sync_engine is not None:
            if write:
                assert self._writer is not None
                result = QUEUED if loop_has_work() else self._writer.run_here(work)
                if result is QUEUED:
                    result = await self._writer.submit(work)
                return result
            return self._read(work)
        return await self._run_async(_as_async(work), write)

    def _read(self, work: Callable[[Connection], T]) -> T:
        """A SQLite read, on this thread's connection."""
        return in_transaction(self._readers.connection(), work)

    async def _run_async(self, work: Callable[[AsyncConnection], Awaitable[T]], write: bool) -> T:
        async with self.engine.connect() as conn:
            if write:
                conn = await conn.execution_options(**{WRITE_OPTION: True})
            elif not self.is_sqlite:
                # Under READ COMMITTED each statement reads its own snapshot anyway: BEGIN and
                # COMMIT around reads would cost two round trips and buy no consistency.
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            try:
                async with conn.begin():
                    result = await work(conn)
                    ready = conn.info.pop(READY_INFO, None)
                    if ready and not self.is_sqlite:
                        # Delivered by PostgreSQL exactly when this transaction commits.
                        await conn.execute(_NOTIFY, {"payload": ",".join(sorted(ready))})
                    return result
            finally:
                # A cancelled or broken connection is invalidated: its info went with it, and
                # touching conn.info would reconnect outside the greenlet (MissingGreenlet
                # instead of the CancelledError that Workers.stop waits for).
                if not conn.invalidated:
                    conn.info.pop(READY_INFO, None)

    def _is_transient(self, exc: DBAPIError) -> bool:
        if exc.connection_invalidated:
            return True
        if self.is_sqlite:
            return isinstance(exc, OperationalError) and is_busy(exc)
        state = getattr(exc.orig, "sqlstate", None) or getattr(
            getattr(exc.orig, "__cause__", None), "sqlstate", None
        )
        return state in _PG_RETRY_STATES

    async def dispose(self) -> None:
        if self._async_engine is not None:
            await self._async_engine.dispose()
        if self._writer is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._writer.close)
            self._readers.close_all()
        if self.sync_engine is not None:
            self.sync_engine.dispose()


def sqlite_file(url: str) -> str | None:
    """The file of a SQLite URL (None: not SQLite, or an in-memory database)."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return parsed.database


def _as_async(work: Callable[[Connection], T]) -> Callable[[AsyncConnection], Awaitable[T]]:
    """A plain unit of work, run on an async connection (PostgreSQL through asyncpg)."""

    async def run(conn: AsyncConnection) -> T:
        return await conn.run_sync(work)

    return run


def mark_ready(conn: Connection | AsyncConnection, what: str = RUNS_READY) -> None:
    """This transaction makes work ready (``RUNS_READY``: a queued run; ``OUTBOX_READY``: a
    chat message): wake the other replicas' workers or dispatchers when it commits."""
    conn.info.setdefault(READY_INFO, set()).add(what)


async def outlast_outage(
    attempt: Callable[[], Awaitable[T]],
    *,
    seconds: float,
    stopping: Callable[[], bool],
    what: str,
) -> T:
    """``attempt()``, called again while it fails with ``StoreError`` (the database still
    unreachable once ``transact`` has spent its own retries, within a second), backing off
    from 0.1 s to 1 s, for up to ``seconds`` of waiting and never once ``stopping()``; then
    its last error. ``what`` names it in the log."""
    waited, delay = 0.0, _OUTAGE_FIRST_DELAY
    while True:
        try:
            return await attempt()
        except StoreError as exc:
            if waited + delay > seconds or stopping():
                raise
            log.warning("%s failed, trying again: %s", what, exc)
        await asyncio.sleep(delay)
        waited += delay
        delay = min(delay * 2, _OUTAGE_MAX_DELAY)


def _short(exc: BaseException) -> str:
    message = str(getattr(exc, "orig", None) or exc)
    return message.splitlines()[0][:300] if message else type(exc).__name__
