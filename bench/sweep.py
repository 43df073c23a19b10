"""Time to expire N overdue approval requests; print the figures.

    python bench/sweep.py [--requests 100000] [--db sqlite|URL]

The overdue rows (a waiting run and its pending request, ``expiresAt`` an hour ago) are bulk
inserted straight into the store's tables (``engine/adapters/store/tables.py``), then analyzed as
autovacuum would: running N workflows to park them would measure something else. Then one
``Sweeper.sweep_once()`` expires them all, in its batches, each one a journal event and a
re-queued run, as the background sweeper does.

With a PostgreSQL URL (``postgresql+asyncpg://...``) a scratch database is created on that
server and dropped afterwards. Figures (printed, never asserted): insert rate, sweep time,
expirations per second, and the bare single-row commit rate of the same database with the
ratio expirations/commits.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import func, insert, make_url, select, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from engine.adapters.store import tables as t
from engine.adapters.store.migrate import upgrade_to_head
from engine.assembly import Engine, EngineOptions
from engine.config import parse_config

CHUNK = 5000
CONFIG = """
workflows:
  bench:
    nodes:
      - {id: approve, type: approval, channels: [web], timeoutMinutes: 1}
      - {id: act, type: connector, connector: demo-ledger, action: note, args: {text: hi}}
"""


@asynccontextmanager
async def scratch_database(db: str) -> AsyncIterator[str]:
    """A fresh database: a temporary SQLite file, or a new database on the PostgreSQL server."""
    if db == "sqlite":
        with tempfile.TemporaryDirectory(prefix="signoff-sweep-") as tmp:
            yield f"sqlite+aiosqlite:///{tmp}/sweep.db"
        return
    server = make_url(db)
    name = f"signoff_bench_{secrets.token_hex(4)}"
    admin = create_async_engine(server, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        async with admin.connect() as conn:
            await conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield server.set(database=name).render_as_string(hide_password=False)
        finally:
            async with admin.connect() as conn:
                await conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.dispose()


async def insert_overdue(url: str, n: int) -> float:
    """Bulk insert ``n`` waiting runs, each with a pending request an hour overdue; seconds."""
    engine = create_async_engine(url, poolclass=NullPool)
    now = datetime.now(UTC)
    created, expires = now - timedelta(hours=2), now - timedelta(hours=1)
    started = time.perf_counter()
    try:
        for first in range(0, n, CHUNK):
            ids = [
                f"{i:08d}-0000-4000-8000-{secrets.token_hex(6)}"
                for i in range(first, min(n, first + CHUNK))
            ]
            runs = [
                {
                    "id": rid,
                    "workflow": "bench",
                    "status": "waiting",
                    "input": {},
                    "next_seq": 4,
                    "created_at": created,
                    "updated_at": created,
                }
                for rid in ids
            ]
            requests = [
                {
                    "id": "r" + rid[1:],
                    "run_id": rid,
                    "step_id": "approve",
                    "kind": "node",
                    "status": "pending",
                    "reason": "bench",
                    "approvers": [],
                    "approvals_required": 1,
                    "approvals": 0,
                    "allow_self_approval": False,
                    "timeout_behavior": "auto-reject",
                    "channels": [],
                    "details": {},
                    "deny_reason_required": False,
                    "escalate_to": [],
                    "created_at": created,
                    "expires_at": expires,
                }
                for rid in ids
            ]
            async with engine.begin() as conn:
                await conn.execute(insert(t.runs), runs)
                await conn.execute(insert(t.takeover_requests), requests)
        # A live database's tables grow gradually and autovacuum keeps their statistics; tables
        # bulk-filled a moment ago have none, and PostgreSQL would plan the sweep blind.
        async with engine.begin() as conn:
            await conn.exec_driver_sql("ANALYZE")
    finally:
        await engine.dispose()
    return time.perf_counter() - started


async def bare_commits(url: str, seconds: float = 3.0) -> float:
    """Single-row INSERT + COMMIT per second on the same database, through SQLAlchemy."""
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("CREATE TABLE bench_commit (id INTEGER PRIMARY KEY, v TEXT)"))
            await conn.commit()
            count, started = 0, time.perf_counter()
            while time.perf_counter() - started < seconds:
                await conn.execute(
                    text("INSERT INTO bench_commit (id, v) VALUES (:i, 'x')"), {"i": count}
                )
                await conn.commit()
                count += 1
            return count / (time.perf_counter() - started)
    finally:
        await engine.dispose()


async def main(n: int, db: str) -> None:
    async with scratch_database(db) as url:
        await upgrade_to_head(url)
        print(f"database: {make_url(url).get_backend_name()}, {n:,} overdue requests")
        took = await insert_overdue(url, n)
        print(f"bulk insert: {took:.1f} s ({2 * n / took:,.0f} rows/s)")
        engine = Engine(
            parse_config(f"database: {{url: '{url}'}}\n" + CONFIG, {}),
            EngineOptions(sweep_interval_seconds=3600),
        )
        try:
            if engine.db_clock is not None:
                await engine.db_clock.sync()
            started = time.perf_counter()
            expired = await engine.sweeper.sweep_once()
            took = time.perf_counter() - started
        finally:
            await engine.stop()
        check = create_async_engine(url, poolclass=NullPool)
        try:
            async with check.connect() as conn:
                left = await conn.scalar(
                    select(func.count())
                    .select_from(t.takeover_requests)
                    .where(t.takeover_requests.c.status == "pending")
                )
                queued = await conn.scalar(
                    select(func.count()).select_from(t.runs).where(t.runs.c.status == "queued")
                )
        finally:
            await check.dispose()
        rate = expired / took if took else 0.0
        print(
            f"sweep: {expired:,} expired in {took:.1f} s ({rate:,.0f} expirations/s); "
            f"left pending {left}, runs re-queued {queued:,}"
        )
        commits = await bare_commits(url)
        print(
            f"bare single-row commits: {commits:,.0f}/s; "
            f"ratio expirations/commits: {rate / commits:.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--db", default="sqlite", help="sqlite, or a postgresql+asyncpg:// URL")
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.db))
