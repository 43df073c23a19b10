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
import contextlib
import inspect
import logging
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

from engine.errors import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")

_OUTAGE_FIRST_DELAY, _OUTAGE_MAX_DELAY = 0.1, 1.0  # outlast_outage's backoff, seconds
Work = Callable[[Connection], T]

SQLITE_BUSY_TIMEOUT_MS = 10_000
_WRITE = "signoff_write"
_READY = "signoff_ready"
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
            _configure_sqlite(self.sync_engine, through_driver=True)
            self._writer: _Writer | None = _Writer(self.sync_engine)
            # Reads run on the caller's thread, each thread on a connection of its own that it
            # keeps: a pool checkout and return cost more than the read itself.
            self._readers = _Held(self.sync_engine)
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
            _configure_sqlite(self._async_engine.sync_engine, through_driver=False)
        return self._async_engine

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
                result = _QUEUED if _loop_has_work() else self._writer.run_here(work)
                if result is _QUEUED:
                    result = await self._writer.submit(work)
                return result
            return self._read(work)
        return await self._run_async(_as_async(work), write)

    def _read(self, work: Callable[[Connection], T]) -> T:
        """A SQLite read, on this thread's connection."""
        return _in_transaction(self._readers.connection(), work)

    async def _run_async(self, work: Callable[[AsyncConnection], Awaitable[T]], write: bool) -> T:
        async with self.engine.connect() as conn:
            if write:
                conn = await conn.execution_options(**{_WRITE: True})
            elif not self.is_sqlite:
                # Under READ COMMITTED each statement reads its own snapshot anyway: BEGIN and
                # COMMIT around reads would cost two round trips and buy no consistency.
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            try:
                async with conn.begin():
                    result = await work(conn)
                    ready = conn.info.pop(_READY, None)
                    if ready and not self.is_sqlite:
                        # Delivered by PostgreSQL exactly when this transaction commits.
                        await conn.execute(_NOTIFY, {"payload": ",".join(sorted(ready))})
                    return result
            finally:
                # A cancelled or broken connection is invalidated: its info went with it, and
                # touching conn.info would reconnect outside the greenlet (MissingGreenlet
                # instead of the CancelledError that Workers.stop waits for).
                if not conn.invalidated:
                    conn.info.pop(_READY, None)

    def _is_transient(self, exc: DBAPIError) -> bool:
        if exc.connection_invalidated:
            return True
        if self.is_sqlite:
            return isinstance(exc, OperationalError) and _is_busy(exc)
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


class _Writer:
    """SQLite's one writer: a thread that commits queued units of work in groups."""

    MAX_GROUP = 64

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._held = _Held(engine, write=True)
        # The callers' own write connections (``run_here``): they never wait for a lock.
        self._here = _Held(engine, write=True, busy_timeout_ms=0)
        self._idle = threading.Lock()  # held while a group or a unit here is being committed
        self._closed = False
        self._closing = threading.Lock()
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._serve, name="signoff-sqlite-writer", daemon=True
        )
        self._thread.start()

    def submit(self, work: Callable[[Connection], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._closing:
            if self._closed:
                future.set_exception(StoreError("the database is closed"))
            else:
                self._queue.put(_Job(work, loop, future))
        return future

    def run_here(self, work: Callable[[Connection], T]) -> T | object:
        """Commit ``work`` on the caller's thread when the writer is idle (nothing queued, no
        group being committed): a lone write then skips the hops to the writer thread and
        back, most of its latency. Returns ``_QUEUED`` when the writer is busy, or when
        another process holds SQLite's lock (this connection does not wait for it: the
        caller's event loop would wait with it); the caller queues the unit instead."""
        if self._closed or self._queue.qsize() or not self._idle.acquire(blocking=False):
            return _QUEUED
        try:
            return _in_transaction(self._here.connection(), work)
        except (OperationalError, sqlite3.OperationalError) as exc:  # BEGIN raises the latter
            if _is_busy(exc):
                return _QUEUED  # rolled back whole; units are safe to run again
            raise
        finally:
            self._idle.release()

    def close(self) -> None:
        with self._closing:  # nothing is queued behind the None
            self._closed = True
            self._queue.put(None)
        self._thread.join(timeout=30)

    def _serve(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                with self._idle:
                    self._held.close_all()
                    self._here.close_all()
                self._refuse_queued()
                return
            group = [first]
            while len(group) < self.MAX_GROUP:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    self._queue.put(None)  # finish this group, then stop
                    break
                group.append(job)
            with self._idle:
                self._commit(group)

    def _refuse_queued(self) -> None:
        """Units queued after the close: their callers get an error, never a hang."""
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                closed = StoreError("the database is closed")
                with contextlib.suppress(RuntimeError):  # its loop is closed too
                    job.loop.call_soon_threadsafe(_settle, job.future, False, closed)

    def _commit(self, group: list[_Job]) -> None:
        try:
            try:
                outcomes = self._apply(group, savepoints=False)
            except _UnitFailed:
                # Units are safe to run again: the group is redone with a savepoint per unit,
                # so the failed one is rolled back alone and the others still commit.
                outcomes = self._apply(group, savepoints=True)
        except Exception as exc:  # a lone unit failed, or BEGIN or COMMIT did: nothing applied
            outcomes = [(False, exc)] * len(group)
        # One wake-up per event loop for the whole group, not one per unit: each is a write
        # to the loop's self-pipe, a system call.
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
        for job, (ok, value) in zip(group, outcomes, strict=True):
            by_loop.setdefault(job.loop, []).append((job.future, ok, value))
        for loop, settled in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
                loop.call_soon_threadsafe(_settle_all, settled)

    def _apply(self, group: list[_Job], *, savepoints: bool) -> list[tuple[bool, Any]]:
        """Run the group's units in one transaction and commit it. Without ``savepoints`` a
        failing unit rolls the whole group back (``_UnitFailed``, or its own error when it is
        alone): savepoints cost more on every group than redoing the rare failing one."""
        outcomes: list[tuple[bool, Any]] = []

        def units(conn: Connection) -> None:
            for job in group:
                if not savepoints:
                    try:
                        outcomes.append((True, job.work(conn)))
                    except Exception as exc:
                        if len(group) == 1:
                            raise
                        raise _UnitFailed() from exc
                    continue
                try:
                    with conn.begin_nested():
                        outcomes.append((True, job.work(conn)))
                except Exception as exc:  # this unit alone is rolled back
                    outcomes.append((False, exc))

        _in_transaction(self._held.connection(), units)
        return outcomes


_QUEUED = object()


def _loop_has_work() -> bool:
    """Whether more than a few callbacks are ready to run on this event loop. A write
    committed here would hold them up; sent to the writer thread, it lets them run meanwhile
    (and commit with the writes they make). With (nearly) nothing else ready the loop would
    only wait for the writer: then the write is committed here. A few is what the engine
    itself leaves ready around any write (a worker's task just created, a future settled).
    (asyncio's ready queue is private: a loop without one counts as busy, and its writes all
    go to the writer.)"""
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    return ready is None or len(ready) > _NEARLY_IDLE


_NEARLY_IDLE = 3


def _is_busy(exc: Exception) -> bool:
    message = str(getattr(exc, "orig", None) or exc).lower()
    return "locked" in message or "busy" in message


class _UnitFailed(Exception):
    """A unit of a group run without savepoints failed: the group is redone with them."""


@dataclass(slots=True)
class _Job:
    work: Callable[[Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


class _Held:
    """A SQLite connection per thread, kept open between transactions; one that broke (was
    invalidated) is replaced at the next use."""

    def __init__(
        self, engine: Engine, *, write: bool = False, busy_timeout_ms: int | None = None
    ) -> None:
        self._engine = engine
        self._write = write
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._all: list[Connection] = []  # every thread's, for ``close_all``
        self._lock = threading.Lock()

    def connection(self) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self._local.conn = self._engine.connect()
            if self._write:
                conn.execution_options(**{_WRITE: True})
            if self._busy_timeout_ms is not None:
                driver = conn.connection.driver_connection
                assert driver is not None
                driver.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            with self._lock:
                self._all.append(conn)
        return conn

    def close_all(self) -> None:
        with self._lock:
            held, self._all = self._all, []
        for conn in held:
            with contextlib.suppress(Exception):
                conn.close()


def _in_transaction(conn: Connection, work: Callable[[Connection], T]) -> T:
    try:
        with conn.begin():
            return work(conn)
    finally:
        if not conn.invalidated:
            conn.info.pop(_READY, None)


def _settle_all(settled: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for future, ok, value in settled:
        _settle(future, ok, value)


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _as_async(work: Callable[[Connection], T]) -> Callable[[AsyncConnection], Awaitable[T]]:
    """A plain unit of work, run on an async connection (PostgreSQL through asyncpg)."""

    async def run(conn: AsyncConnection) -> T:
        return await conn.run_sync(work)

    return run


def mark_ready(conn: Connection | AsyncConnection, what: str = RUNS_READY) -> None:
    """This transaction makes work ready (``RUNS_READY``: a queued run; ``OUTBOX_READY``: a
    chat message): wake the other replicas' workers or dispatchers when it commits."""
    conn.info.setdefault(_READY, set()).add(what)


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


def _configure_sqlite(engine: Engine, *, through_driver: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # Take BEGIN out of the driver's hands so writes can say BEGIN IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        # FULL: a committed decision survives a power cut, not only a process crash.
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        statement = "BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN"
        if through_driver:  # straight to sqlite3: this runs for every transaction
            conn.connection.driver_connection.execute(statement)
        else:  # aiosqlite (Alembic): its driver connection is async
            conn.exec_driver_sql(statement)


def _short(exc: BaseException) -> str:
    message = str(getattr(exc, "orig", None) or exc)
    return message.splitlines()[0][:300] if message else type(exc).__name__
