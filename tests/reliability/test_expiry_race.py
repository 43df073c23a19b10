"""Expiry race: grants that arrive within milliseconds of ``expiresAt`` give exactly one
outcome (granted or expired, never both, never neither), and a replica whose own clock is ten
minutes fast or slow (``SIGNOFF_CLOCK_SKEW_SECONDS``; the engine then follows the database's
clock, ``engine/adapters/store/dbclock.py``) changes nothing: no request expires early, none is
granted late. Three replicas on PostgreSQL -- one on time, one +10 min, one -10 min.

The shortest approval timeout is one minute, so this test waits about a minute.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from sqlalchemy import select

from engine.adapters.store import tables as t
from engine.domain.model import Role
from tests.reliability.cluster import TERMINAL, Cluster, size, start_runs
from tests.support.process import Server
from tests.support.waiting import quiet

SKEWS = (0, 600, -600)  # seconds, per replica
WINDOW_MS = 60  # grants land in expiresAt +- this

CONFIG = """\
people:
  alice: {email: alice@example.com}
  bob: {email: bob@example.com}
admins: [alice]
workflows:
  expiring:
    nodes:
      - {id: approve, type: approval, approvers: [bob], channels: [web], timeoutMinutes: 1,
         timeoutBehavior: auto-reject, onDeny: expired}
      - {id: act, type: connector, connector: demo-ledger, action: refund,
         args: {order: "{{ input.order }}"}, next: end}
      - {id: expired, type: connector, connector: demo-ledger, action: note,
         args: {text: "expired {{ input.order }}"}}
"""


@pytest.fixture
async def cluster(migrated_postgres_url: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    c = Cluster(
        tmp_path,
        migrated_postgres_url,
        CONFIG,
        replicas=len(SKEWS),
        server="{workers: 8, leaseSeconds: 30, pollSeconds: 0.2}",
    )
    try:
        await c.setup()
        for server, skew in zip(c.servers, SKEWS, strict=True):
            if skew:
                server.env["SIGNOFF_CLOCK_SKEW_SECONDS"] = str(skew)
        await c.create_tokens([("agent", Role.AGENT, None), ("bob", Role.APPROVER, "bob")])
        await c.start()
        yield c
    finally:
        await c.close()


@pytest.mark.postgres
async def test_grants_at_expires_at_give_one_outcome_whatever_the_clock(
    cluster: Cluster,
) -> None:
    n = size(ci=30, full=300)
    rng = random.Random(3)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        run_ids = await start_runs(http, cluster, cluster.tokens["agent"], "expiring", n)

        async def all_parked() -> dict[str, str] | None:
            pending = await cluster.pending_requests()
            return pending if len(pending) == n else None

        pending = await cluster.wait_until("every run to park", all_parked, 50)
        tr = t.takeover_requests.c
        async with cluster.db.connect() as conn:
            rows = list(await conn.execute(select(tr.run_id, tr.expires_at, tr.created_at)))
        expires = {r.run_id: r.expires_at for r in rows}
        # Every replica, skewed or not, wrote expiresAt = database time + 1 min.
        for r in rows:
            assert abs((r.expires_at - r.created_at) - timedelta(minutes=1)) < timedelta(
                seconds=1
            ), r
            assert abs(r.created_at - datetime.now(UTC)) < timedelta(seconds=90), r

        async def grant_at(run_id: str, at: datetime, server: Server) -> tuple[str, int, str]:
            # The test's clock is the database's (same machine): wait until ``at``.
            delay = (at - datetime.now(UTC)).total_seconds()
            if delay > 0:
                await quiet(delay)  # the database's clock is real time
            async with http.post(
                f"{server.base}/v1/runs/{run_id}/takeover/{pending[run_id]}/grant",
                json={"release": True},
                headers={"Authorization": f"Bearer {cluster.tokens['bob']}"},
            ) as resp:
                body = await resp.json(content_type=None)
                return run_id, resp.status, body.get("error", "")

        # A few early grants (5 s before expiresAt) go to the skewed replicas: a replica that
        # trusted its +10 min clock would call them expired.
        early = set(run_ids[: max(2, n // 10)])
        plans = []
        for run_id in run_ids:
            if run_id in early:
                at = expires[run_id] - timedelta(seconds=5)
                server = cluster.servers[1 + run_ids.index(run_id) % 2]
            else:
                at = expires[run_id] + timedelta(milliseconds=rng.uniform(-WINDOW_MS, WINDOW_MS))
                server = rng.choice(cluster.servers)
            plans.append(grant_at(run_id, at, server))
        started = time.monotonic()
        results = await asyncio.gather(*plans)
        waited = time.monotonic() - started

        async def all_terminal() -> dict[str, str] | None:
            runs = await cluster.run_statuses()
            return runs if all(s in TERMINAL for s in runs.values()) else None

        await cluster.wait_until("every run to finish", all_terminal, 60)

    statuses = Counter(status for _, status, _ in results)
    assert set(statuses) <= {200, 409}, results
    async with cluster.db.connect() as conn:
        final = {
            r.run_id: r for r in await conn.execute(select(tr.run_id, tr.status, tr.decided_at))
        }
    journal = await cluster.journal_counts()
    ledger = Counter((r.run_id, r.step_id) for r in await cluster.ledger_rows())
    outcomes = Counter[str]()
    for run_id, status, error in results:
        events = journal[run_id]
        granted = events[("takeover_granted", "approve")]
        expired = events[("takeover_expired", "approve")]
        assert granted + expired == 1, (run_id, events)  # exactly one outcome
        request = final[run_id]
        if status == 200:
            assert granted == 1 and request.status == "released", (request, events)
            assert ledger[(run_id, "act")] == 1 and ledger[(run_id, "expired")] == 0
            outcomes["granted"] += 1
        else:
            assert error in ("already_decided", "expired"), error
            assert expired == 1 and request.status == "expired", (request, events)
            assert ledger[(run_id, "expired")] == 1 and ledger[(run_id, "act")] == 0
            outcomes["expired"] += 1
        assert request.decided_at is not None
        if request.status == "released":  # granted in time, by the database's clock
            assert request.decided_at < expires[run_id] + timedelta(milliseconds=250), request
        else:  # never expired early, whichever replica swept it
            assert request.decided_at >= expires[run_id] - timedelta(milliseconds=250), request
        if run_id in early:
            assert status == 200, (run_id, status, error)  # the skewed replica did not expire it
    print(
        f"\nreplicas skewed {SKEWS} s: {n} requests, grants within +-{WINDOW_MS} ms of "
        f"expiresAt: {dict(outcomes)} ({len(early)} early grants on skewed replicas all won), "
        f"double outcomes 0, none expired early; waited {waited:.0f} s"
    )
