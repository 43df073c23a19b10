"""SQLite's side of ``engine.adapters.store.db.Database``: the one writer thread that commits queued
units of work in groups (group commit: one fsync for many decisions), the connections each
thread keeps, and the pragmas every connection gets. See ``engine.adapters.store.db`` for how units
of work reach them."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import ConnectionPoolEntry

from engine.domain.errors import StoreError

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_MS = 10_000
WRITE_OPTION = "signoff_write"
"""The execution option of a connection that writes: SQLite's BEGIN is BEGIN IMMEDIATE."""
READY_INFO = "signoff_ready"
"""The ``Connection.info`` key where ``engine.adapters.store.db.mark_ready`` notes what a
transaction makes ready; cleared when the transaction ends."""


class Writer:
    """SQLite's one writer: a thread that commits queued units of work in groups."""

    MAX_GROUP = 64

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        # One connection writes, the writer thread's groups and the callers' units (``run_here``)
        # in turn (``_idle``): SQLite drops a connection's whole page cache when it finds that
        # another connection wrote since its last transaction, and with a connection each the
        # two sides dropped each other's at every turn (measured: 23 page reads from the file
        # per parked run, bench/peers.py).
        self._conn: Connection | None = None
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
        back, most of its latency. Returns ``QUEUED`` when the writer is busy, or when
        another process holds SQLite's lock (this connection does not wait for it: the
        caller's event loop would wait with it); the caller queues the unit instead."""
        if self._closed or self._queue.qsize() or not self._idle.acquire(blocking=False):
            return QUEUED
        try:
            conn = self._connection()
            driver = conn.connection.driver_connection
            assert driver is not None
            driver.execute("PRAGMA busy_timeout=0")  # here, never wait for the lock
            try:
                return in_transaction(conn, work)
            finally:
                if not conn.invalidated:
                    driver.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        except (OperationalError, sqlite3.OperationalError) as exc:  # BEGIN raises the latter
            if is_busy(exc):
                return QUEUED  # rolled back whole; units are safe to run again
            raise
        finally:
            self._idle.release()

    def _connection(self) -> Connection:
        """The write connection (``_idle`` held); one that broke is replaced."""
        conn = self._conn
        if conn is None or conn.closed or conn.invalidated:
            conn = self._conn = self._engine.connect()
            conn.execution_options(**{WRITE_OPTION: True})
        return conn

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
                    if self._conn is not None:
                        with contextlib.suppress(Exception):
                            self._conn.close()
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

        in_transaction(self._connection(), units)
        return outcomes


QUEUED = object()


def loop_has_work() -> bool:
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


def is_busy(exc: Exception) -> bool:
    message = str(getattr(exc, "orig", None) or exc).lower()
    return "locked" in message or "busy" in message


class _UnitFailed(Exception):
    """A unit of a group run without savepoints failed: the group is redone with them."""


@dataclass(slots=True)
class _Job:
    work: Callable[[Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


class Held:
    """A SQLite read connection per thread, kept open between transactions; one that broke
    (was invalidated) is replaced at the next use."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._local = threading.local()
        self._all: list[Connection] = []  # every thread's, for ``close_all``
        self._lock = threading.Lock()

    def connection(self) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self._local.conn = self._engine.connect()
            with self._lock:
                self._all.append(conn)
        return conn

    def close_all(self) -> None:
        with self._lock:
            held, self._all = self._all, []
        for conn in held:
            with contextlib.suppress(Exception):
                conn.close()


def in_transaction(conn: Connection, work: Callable[[Connection], T]) -> T:
    try:
        with conn.begin():
            return work(conn)
    finally:
        if not conn.invalidated:
            conn.info.pop(READY_INFO, None)


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


def configure_sqlite(engine: Engine, *, through_driver: bool) -> None:
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
        statement = "BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "BEGIN"
        if through_driver:  # straight to sqlite3: this runs for every transaction
            conn.connection.driver_connection.execute(statement)
        else:  # aiosqlite (Alembic): its driver connection is async
            conn.exec_driver_sql(statement)
