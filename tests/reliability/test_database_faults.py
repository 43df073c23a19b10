"""Database faults: PostgreSQL connections of the replicas terminated mid-transaction
(``pg_terminate_backend`` from the test, again and again while decisions race), and a locked
SQLite database (another connection holds ``BEGIN EXCLUSIVE`` for seconds while clicks arrive).
Every click is either applied (200), refused (409 ``already_decided``) or reported as an error
(5xx/503) -- and then the decision is whole: one decision per request, its journal events
written with it, every run finishes once. Nothing is half-applied. A step is called once,
or (when the storm kept a worker from renewing its lease for a whole lease) once more with the
same idempotency key by the worker that took the run over, never sooner.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import text

from tests.reliability.cluster import TERMINAL, Cluster, approvers_cluster, size, start_runs
from tests.reliability.test_exactly_one_decision import CONFIG, RACERS, click
from tests.support.waiting import quiet

LOCK_SECONDS = 3.0
LEASE = timedelta(seconds=5)
CLOCK_SLACK = timedelta(seconds=0.5)  # the replicas' clocks follow the database's, roughly


@pytest.fixture
async def cluster(db_url: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    server = f"{{workers: 8, leaseSeconds: {LEASE.total_seconds():.0f}, pollSeconds: 0.2}}"
    async with approvers_cluster(tmp_path, db_url, CONFIG, RACERS, server) as c:
        yield c


def hold_exclusive(path: str, seconds: float, held: threading.Event) -> None:
    """Another process's view of the file: an exclusive lock for ``seconds``."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        held.set()
        threading.Event().wait(seconds)
        conn.execute("COMMIT")
    finally:
        conn.close()


async def terminate_backends(cluster: Cluster, rounds: int, stop: asyncio.Event) -> int:
    """Kill every other session on the test database, ``rounds`` times while the storm lasts."""
    killed = 0
    for _ in range(rounds):
        if stop.is_set():
            break
        async with cluster.db.connect() as conn:
            result = await conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
            killed += int(result.scalar() or 0)
            await conn.commit()
        await quiet(0.15)  # the storm, in real time
    return killed


async def test_faults_are_retried_or_reported_never_half_applied(
    cluster: Cluster, db_url: str
) -> None:
    n = size(ci=20, full=200)
    rng = random.Random(4)
    sqlite = db_url.startswith("sqlite")
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        run_ids = await start_runs(http, cluster, cluster.tokens["agent"], "pay", n)

        async def all_parked() -> dict[str, str] | None:
            pending = await cluster.pending_requests()
            return pending if len(pending) == n else None

        pending = await cluster.wait_until("every run to park", all_parked, 60 + n * 0.3)

        async def storm() -> list[tuple[str, str, int, Any]]:
            async def one(run_id: str) -> list[tuple[str, str, int, Any]]:
                clicks = [
                    (
                        rng.choice(cluster.servers).base,
                        rng.choice(RACERS),
                        rng.choice(("grant", "deny")),
                    )
                    for _ in range(rng.randint(2, 10))
                ]
                out = []
                for verb, status, body in await asyncio.gather(
                    *(
                        click(http, base, cluster.tokens[who], run_id, pending[run_id], verb)
                        for base, who, verb in clicks
                    )
                ):
                    out.append((run_id, verb, status, body))
                return out

            return [r for rs in await asyncio.gather(*(one(r) for r in run_ids)) for r in rs]

        fault = ""
        if sqlite:
            held = threading.Event()
            path = db_url.split(":///", 1)[1]
            locker = threading.Thread(target=hold_exclusive, args=(path, LOCK_SECONDS, held))
            locker.start()
            try:
                await asyncio.to_thread(held.wait, 10)
                results = await storm()
            finally:
                await asyncio.to_thread(locker.join, 30)
            fault = f"BEGIN EXCLUSIVE held {LOCK_SECONDS} s"
        else:
            stop = asyncio.Event()
            killer = asyncio.create_task(terminate_backends(cluster, 20, stop))
            try:
                results = await storm()
            finally:
                stop.set()
                killed = await killer
            fault = f"{killed} backends terminated"

        statuses = Counter(status for _, _, status, _ in results)
        assert set(statuses) <= {200, 409, 500, 503}, statuses
        # A click that was reported as an error may or may not have been applied; ask again.
        decided = {run_id for run_id, _, status, _ in results if status == 200}
        retried = 0
        for run_id in run_ids:
            if run_id in decided:
                continue
            for _ in range(20):  # bounded
                _, status, body = await click(
                    http,
                    cluster.servers[0].base,
                    cluster.tokens[RACERS[0]],
                    run_id,
                    pending[run_id],
                    "grant",
                )
                retried += 1
                if status in (200, 409):
                    break
                await quiet(0.2)  # real replicas recover
            assert status in (200, 409), (status, body)

        async def all_terminal() -> dict[str, str] | None:
            runs = await cluster.run_statuses()
            return runs if all(s in TERMINAL for s in runs.values()) else None

        runs = await cluster.wait_until("every run to finish", all_terminal, 60 + n * 0.3)
    if set(runs.values()) != {"completed"}:
        for run_id, (error, last) in (await cluster.failures()).items():
            print(f"\nfailed run {run_id}: {error}", *last, sep="\n  ")
    assert set(runs.values()) == {"completed"}, Counter(runs.values())
    journal = await cluster.journal_counts()
    requests = {r.run_id: r for r in await cluster.takeovers()}
    calls: dict[tuple[str, str], list[Any]] = {}
    for row in sorted(await cluster.ledger_rows(), key=lambda r: r.at):
        calls.setdefault((row.run_id, row.step_id), []).append(row)
    again = 0
    for run_id in run_ids:
        events = journal[run_id]
        granted = events[("takeover_granted", "approve")]
        denied = events[("takeover_denied", "approve")]
        assert granted + denied == 1, (run_id, events)
        request = requests[run_id]
        assert request.status == ("released" if granted else "denied"), request
        assert request.decided_by is not None
        branch = "act" if granted else "refused"
        for step in ("prepare", branch):
            made = calls.get((run_id, step), [])
            if len(made) != 1:
                print(f"\n{step} of {run_id} called {len(made)} times:", *made, sep="\n  ")
                print("journal:", *await cluster.journal_of(run_id), sep="\n  ")
            assert len(made) in (1, 2), made
            if len(made) == 2:
                # Called once more only with the same key, by the worker that took the run
                # over when the first one's lease ran out while the storm kept it from
                # committing or renewing (at-least-once, DESIGN): not sooner. A read step
                # commits its start with its result, so it has no start to count from.
                assert made[0].idempotency_key == made[1].idempotency_key, made
                if step != "prepare":
                    started = min(
                        at
                        for _, event, step_id, _, at in await cluster.journal_of(run_id)
                        if (event, step_id) == ("step_started", step)
                    )
                    assert made[1].at - started >= LEASE - CLOCK_SLACK, (made, started)
                again += 1
        assert events[("run_completed", None)] == 1, events
    errors = sum(v for k, v in statuses.items() if k >= 500)
    print(
        f"\n{len(cluster.servers)} replica(s), {fault}: {len(results)} clicks -> "
        f"{dict(statuses)}; {errors} reported errors, {retried} re-clicks; "
        f"{n} requests, {n} decisions, 0 half-applied; steps called again after a lease "
        f"ran out: {again} (same key each)"
    )
