"""SQLite's writer thread: the hot path's statements run on the driver itself and give what
SQLAlchemy gives, and a write after the database is closed fails instead of waiting forever."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import JSON, Column, Integer, MetaData, Table, create_engine, insert, select, text
from sqlalchemy.dialects import sqlite

from engine.adapters.store import Database, SqlStore, expiry, journal
from engine.adapters.store import tables as t
from engine.adapters.store.fast import Fast
from engine.adapters.store.migrate import upgrade_to_head
from engine.adapters.store.sqlite_writer import SQLITE_BUSY_TIMEOUT_MS
from engine.domain.errors import StoreError
from engine.domain.records import NewRun
from tests.support.waiting import quiet

NOW = datetime(2026, 11, 30, 12, 0, 0, 0, tzinfo=UTC)  # no microseconds: the format keeps them


@pytest.fixture
async def store(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'w.db'}"
    await upgrade_to_head(url)
    store = SqlStore(Database(url))
    yield store
    await store.db.dispose()


async def test_a_write_after_close_is_refused(store: SqlStore) -> None:
    await store.db.dispose()
    with pytest.raises(StoreError, match="closed"):
        await store.create_run(NewRun(id="r1", workflow="w", input={}), NOW)


async def test_fast_rows_read_back_like_sqlalchemy_rows(store: SqlStore) -> None:
    """A run written on the fast path reads back the same through ``Connection.execute``
    (types, JSON, timestamps), and the fast read gives what SQLAlchemy's read gives."""
    await store.create_run(NewRun(id="r1", workflow="w", input={"n": [1, "é"]}), NOW)
    run, journal = await store.run_and_journal("r1")

    def slow(conn):
        row = conn.execute(select(t.runs).where(t.runs.c.id == "r1")).mappings().one()
        raw = conn.execute(text("SELECT created_at, input FROM runs WHERE id = 'r1'")).one()
        return dict(row), tuple(raw)

    row, raw = await store.db.transact(slow, write=False)
    assert run.input == row["input"] == {"n": [1, "é"]}
    assert run.created_at == row["created_at"] == NOW
    assert raw == ("2026-11-30 12:00:00.000000", '{"n": [1, "\\u00e9"]}')
    assert [(e.seq, e.event.value, e.at) for e in journal] == [(1, "run_started", NOW)]


async def test_a_constraint_error_is_sqlalchemys(store: SqlStore) -> None:
    await store.create_run(NewRun(id="r1", workflow="w", input={}), NOW)
    with pytest.raises(StoreError, match=r"UNIQUE constraint failed: runs\.id"):
        await store.create_run(NewRun(id="r1", workflow="w", input={}), NOW)


async def test_a_lone_write_commits_on_the_callers_thread(store: SqlStore) -> None:
    def where(conn) -> str:
        conn.execute(text("CREATE TABLE IF NOT EXISTS probe (x INTEGER)"))
        return threading.current_thread().name

    assert await store.db.transact(where) == threading.current_thread().name
    # Queued behind others, units go to the writer and are committed together.
    names = await asyncio.gather(*(store.db.transact(where) for _ in range(20)))
    assert "signoff-sqlite-writer" in names


async def test_the_callers_and_the_writer_thread_write_on_one_connection(store: SqlStore) -> None:
    """One connection: SQLite drops a connection's page cache whenever another connection
    wrote since its last transaction. A unit here does not wait for SQLite's lock; the
    writer thread's do."""

    def probe(conn) -> tuple[str, int, int]:
        driver = conn.connection.driver_connection
        (timeout,) = driver.execute("PRAGMA busy_timeout").fetchone()
        return threading.current_thread().name, id(driver), timeout

    here = await store.db.transact(probe)
    queued = await asyncio.gather(*(store.db.transact(probe) for _ in range(20)))
    by_writer = [found for found in queued if found[0] == "signoff-sqlite-writer"]
    assert here[0] == threading.current_thread().name and here[2] == 0
    assert by_writer
    assert {(driver, timeout) for _, driver, timeout in by_writer} == {
        (here[1], SQLITE_BUSY_TIMEOUT_MS)
    }


async def test_another_process_holding_the_lock_never_blocks_the_loop(
    store: SqlStore, tmp_path
) -> None:
    """The caller's thread does not wait for SQLite's lock: the write goes to the writer
    thread, which waits for it, and the event loop goes on meanwhile."""
    other = sqlite3.connect(tmp_path / "w.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's write transaction
    write = asyncio.create_task(store.create_run(NewRun(id="r1", workflow="w", input={}), NOW))
    ticks = 0
    for _ in range(20):  # the loop runs: each real pause returns on time
        started = time.monotonic()
        await quiet(0.01)
        assert time.monotonic() - started < 0.5
        ticks += 1
    assert not write.done() and ticks == 20
    other.execute("COMMIT")
    other.close()
    run, created = await asyncio.wait_for(write, timeout=10)
    assert created and run.id == "r1"
    # The connection that met the lock is fine for the next write.
    _, created = await store.create_run(NewRun(id="r2", workflow="w", input={}), NOW)
    assert created


@pytest.mark.parametrize(
    "when",
    [
        NOW,
        datetime(999, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        datetime(2026, 6, 1, 12, 0, 0, 123, tzinfo=ZoneInfo("Europe/Paris")),
        datetime(2026, 1, 1, 23, 59, 59, 999_999, tzinfo=timezone(timedelta(hours=-3))),
    ],
)
def test_sqlite_timestamps_are_sqlalchemys_text_of_the_utc_time(when: datetime) -> None:
    """The timestamp type's own SQLite processors write the text SQLAlchemy's ``DATETIME``
    writes for the same UTC time (databases written before read the same, text order is time
    order) and read it back as the same aware instant."""
    dialect = sqlite.dialect()
    bind = t.UTCDateTime().bind_processor(dialect)
    read = t.UTCDateTime().result_processor(dialect, None)
    stored = bind(when)
    assert stored == sqlite.DATETIME().bind_processor(dialect)(
        when.astimezone(UTC).replace(tzinfo=None)
    )
    assert read(stored) == when
    assert read(stored).tzinfo is UTC
    assert bind(None) is None and read(None) is None


def test_a_naive_timestamp_is_refused_on_sqlite() -> None:
    with pytest.raises(ValueError, match="naive"):
        t.UTCDateTime().bind_processor(sqlite.dialect())(datetime(2026, 1, 1))


async def test_the_sweeps_statements_run_on_the_driver(store: SqlStore) -> None:
    """A SQLite sweep batch binds its keys as one JSON array: its statements are constant and
    run on the fast path (a list bound to IN would send them through SQLAlchemy's execution
    layer, about a third of a sweep's CPU), and they expire and re-queue what they name."""
    now = NOW
    await store.create_run(NewRun(id="r1", workflow="w", input={}), now)
    await store.create_run(NewRun(id="r2", workflow="w", input={}), now)

    def seed(conn: Any) -> None:
        for run_id in ("r1", "r2"):
            conn.execute(
                t.takeover_requests.insert().values(
                    id=f"tk-{run_id}",
                    run_id=run_id,
                    step_id="approve",
                    kind="node",
                    status="pending",
                    reason="r",
                    approvers=[],
                    approvals_required=1,
                    approvals=0,
                    allow_self_approval=False,
                    timeout_behavior="auto-reject",
                    channels=[],
                    details={},
                    deny_reason_required=False,
                    escalate_to=[],
                    created_at=now,
                    expires_at=now,
                )
            )
            conn.execute(t.runs.update().where(t.runs.c.id == run_id).values(status="waiting"))

    await store.db.transact(seed)
    expired = await store.expire_due(now + timedelta(seconds=1), limit=10)
    assert sorted(r.id for r in expired) == ["tk-r1", "tk-r2"]
    # the re-queue is the journal's batch append (``requeue_with_events``)
    assert not expiry._SQLITE_EXPIRE._slow and not journal._REQUEUE_MANY._slow
    statuses = await store.db.transact(
        lambda conn: dict(conn.execute(select(t.runs.c.id, t.runs.c.status)).all()), write=False
    )
    assert statuses == {"r1": "queued", "r2": "queued"}


def test_sqlite_timestamps_repeated_and_interleaved_convert_alike() -> None:
    """Each way remembers its last conversion: the same value again, another one, then the
    first again each give what converting it afresh gives."""
    dialect = sqlite.dialect()
    bind = t.UTCDateTime().bind_processor(dialect)
    read = t.UTCDateTime().result_processor(dialect, None)
    first, other = NOW, NOW + timedelta(microseconds=1)
    texts = [bind(v) for v in (first, first, other, first, other, other)]
    fresh = {
        v: v.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
        for v in (first, other)
    }
    assert texts == [fresh[first], fresh[first], fresh[other], fresh[first]] + [fresh[other]] * 2
    assert [read(x) for x in texts] == [first, first, other, first, other, other]
    with pytest.raises(ValueError, match="naive"):
        bind(first.replace(tzinfo=None))


@pytest.mark.parametrize(
    "value",
    [{"a": [1, 2.5, "é", None, True]}, [1, {"b": "c"}], "text", 7, 1.5, False, {}, JSON.NULL],
)
def test_fast_json_is_stored_and_read_as_sqlalchemy_does(value: Any) -> None:
    """The fast path's JSON processors store the text SQLAlchemy's would and read back what
    it reads; its ``JSON.NULL`` goes through SQLAlchemy's processor (JSON ``null``)."""
    table = Table(
        "j", MetaData(), Column("k", Integer, primary_key=True), Column("v", JSON, nullable=True)
    )
    engine = create_engine("sqlite://")
    with engine.begin() as conn:
        table.create(conn)
        Fast(insert(table))(conn, {"k": 1, "v": value})
        conn.execute(insert(table), {"k": 2, "v": value})
        stored = conn.execute(text("SELECT v FROM j ORDER BY k")).scalars().all()
        fast = [row[0] for row in Fast(select(table.c.v).order_by(table.c.k))(conn, {})]
        slow = conn.execute(select(table.c.v).order_by(table.c.k)).scalars().all()
    assert stored[0] == stored[1]
    assert fast == slow == [None if value is JSON.NULL else value] * 2
