"""Exactly one decision: approval requests, each hit by 2-50 concurrent grant/deny clicks spread
across replicas (three ``signoff serve`` processes on one PostgreSQL database, or the single
SQLite process). Every request ends with exactly one decision, every run resumes once and takes
exactly one branch once, and every losing click gets ``409 already_decided``.

Size: 1,000 requests under ``SIGNOFF_RELIABILITY_FULL=1``; a reduced count otherwise.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.reliability.cluster import TERMINAL, Cluster, approvers_cluster, size, start_runs

RACERS = [f"racer{i:02d}" for i in range(20)]
CONFIG = (
    "people:\n"
    + "".join(f"  {n}: {{email: {n}@example.com}}\n" for n in ["alice", *RACERS])
    + f"groups:\n  racers: [{', '.join(RACERS)}]\n"
    + "admins: [alice]\n"
    + """\
workflows:
  pay:
    nodes:
      - {id: prepare, type: connector, connector: demo-ledger, action: lookup,
         args: {order: "{{ input.order }}"}}
      - {id: approve, type: approval, reason: "Pay {{ input.order }}", approvers: [racers],
         channels: [web], timeoutMinutes: 600, onDeny: refused}
      - {id: act, type: connector, connector: demo-ledger, action: refund,
         args: {order: "{{ input.order }}"}, next: end}
      - {id: refused, type: connector, connector: demo-ledger, action: note,
         args: {text: "refused {{ input.order }}"}}
"""
)


@pytest.fixture
async def cluster(db_url: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    """The single SQLite process, or three replicas on PostgreSQL."""
    server = "{workers: 16, leaseSeconds: 30, pollSeconds: 0.2}"
    async with approvers_cluster(tmp_path, db_url, CONFIG, RACERS, server) as c:
        yield c


async def click(
    http: aiohttp.ClientSession, base: str, token: str, run_id: str, request_id: str, verb: str
) -> tuple[str, int, Any]:
    body = {"release": True} if verb == "grant" else {"notes": "no"}
    async with http.post(
        f"{base}/v1/runs/{run_id}/takeover/{request_id}/{verb}",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
    ) as resp:
        return verb, resp.status, await resp.json(content_type=None)


async def test_every_request_gets_exactly_one_decision(cluster: Cluster) -> None:
    n = size(ci=40 if len(cluster.servers) > 1 else 30, full=1000)
    rng = random.Random(10)
    timeout = aiohttp.ClientTimeout(total=120)
    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
        run_ids = await start_runs(http, cluster, cluster.tokens["agent"], "pay", n)

        async def all_parked() -> dict[str, str] | None:
            pending = await cluster.pending_requests()
            return pending if len(pending) == n else None

        pending = await cluster.wait_until("every run to park", all_parked, 60 + n * 0.2)
        assert set(pending) == set(run_ids)

        # Each request: 2-50 clicks by random racers on random replicas, grant or deny.
        plans = {
            run_id: [
                (
                    rng.choice(cluster.servers).base,
                    rng.choice(RACERS),
                    rng.choice(("grant", "deny")),
                )
                for _ in range(rng.randint(2, 50))
            ]
            for run_id in run_ids
        }
        gate = asyncio.Semaphore(4)  # requests raced at once (each with all its clicks)

        async def race(run_id: str) -> list[tuple[str, int, Any]]:
            async with gate:
                return await asyncio.gather(
                    *(
                        click(http, base, cluster.tokens[who], run_id, pending[run_id], verb)
                        for base, who, verb in plans[run_id]
                    )
                )

        results = dict(zip(run_ids, await asyncio.gather(*(race(r) for r in run_ids)), strict=True))

    clicks = sum(len(p) for p in plans.values())
    statuses = Counter(status for rs in results.values() for _, status, _ in rs)
    assert set(statuses) <= {200, 409}, statuses
    winners: dict[str, str] = {}
    for run_id, rs in results.items():
        ok = [(verb, body) for verb, status, body in rs if status == 200]
        assert len(ok) == 1, (run_id, rs)
        winners[run_id] = ok[0][0]
        losers = [body for _, status, body in rs if status == 409]
        assert {b["error"] for b in losers} <= {"already_decided"}, losers
        assert len({b.get("decidedBy") for b in losers}) <= 1, losers

    async def all_terminal() -> dict[str, str] | None:
        runs = await cluster.run_statuses()
        return runs if all(s in TERMINAL for s in runs.values()) else None

    runs = await cluster.wait_until("every run to finish", all_terminal, 60 + n * 0.2)
    assert set(runs.values()) == {"completed"}, Counter(runs.values())

    journal = await cluster.journal_counts()
    ledger = Counter((r.run_id, r.step_id) for r in await cluster.ledger_rows())
    for run_id, verb in winners.items():
        events = journal[run_id]
        decided = "takeover_granted" if verb == "grant" else "takeover_denied"
        assert events[(decided, "approve")] == 1, (run_id, events)
        other = "takeover_denied" if verb == "grant" else "takeover_granted"
        assert events[(other, "approve")] == 0, (run_id, events)
        # A grant resumes through release (run_resumed); a denial re-queues the run on its
        # onDeny path. Either way the run woke once: one branch step started once.
        resumed = sum(v for (e, _), v in events.items() if e == "run_resumed")
        assert resumed == (1 if verb == "grant" else 0), (run_id, events)
        branch, skipped = ("act", "refused") if verb == "grant" else ("refused", "act")
        assert events[("step_started", branch)] == 1, (run_id, events)
        assert events[("step_started", skipped)] == 0, (run_id, events)
        assert events[("run_waiting", "approve")] == 1, (run_id, events)
        assert events[("run_completed", None)] == 1, (run_id, events)
        assert ledger[(run_id, "prepare")] == 1
        assert ledger[(run_id, branch)] == 1, (run_id, ledger)
        assert ledger[(run_id, skipped)] == 0, (run_id, ledger)
    print(
        f"\n{len(cluster.servers)} replica(s): {n} requests, {clicks} clicks, "
        f"{statuses[200]} decisions, {statuses[409]} x 409 already_decided, "
        f"grants {Counter(winners.values())['grant']}, denies {Counter(winners.values())['deny']}"
    )
