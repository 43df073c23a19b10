"""Park N runs of ``prepare -> approval -> act``, then release them all; print the figures.

    python bench/park_resume.py [--runs 10000] [--db sqlite|URL] [--sample 300]

Figures (printed, never asserted):
- park rate: runs started and parked per second;
- asyncio tasks while parked, next to the idle count (a parked run must hold no task);
- RSS before and after parking, and bytes per parked run;
- decisions per second: grant+release of every parked request, 32 at a time;
- release-to-act latency p50/p99: one release at a time (a sample), time from the decision's
  commit to the act step being called;
- the bare single-row commit rate on the same database file (sqlite3, WAL, synchronous=FULL),
  and the ratio decisions/commits.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.adapters.store.migrate import upgrade_to_head
from engine.assembly import Engine, EngineOptions
from engine.config import parse_config
from engine.domain.model import Principal, Role, RunStatus, TakeoverStatus
from engine.ports import ConnectorCall

# prepare reads (a lookup, like the demo's ``demo-ledger lookup``); act writes.
WORKFLOW = """
connectors:
  lookup: {type: python, function: "bench.park_resume:lookup", actions: {get: {kind: read}}}
  act: {type: python, function: "bench.park_resume:prepare", actions: {go: {kind: write}}}
workflows:
  bench:
    nodes:
      - {id: prepare, type: connector, connector: lookup, action: get,
         args: {n: "{{ input.n }}"}}
      - {id: approve, type: approval, reason: "act on {{ input.n }}", channels: [web]}
      - {id: act, type: connector, connector: act, action: go, args: {n: "{{ input.n }}"}}
"""


def prepare(n: int) -> dict[str, int]:
    return {"n": n}


def lookup(action: str, args: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
    """The prepare step's read, as a python connector calls it."""
    return prepare(int(args["n"]))


class ActClock:
    """A connector that notes when each run's act step is called."""

    def __init__(self) -> None:
        self.called: dict[str, float] = {}

    async def call(self, call: ConnectorCall) -> Any:
        self.called[call.run_id or ""] = time.perf_counter()
        return {"ok": True}


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def bare_commit_rate(path: str, seconds: float = 3.0) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS bench_commit (id INTEGER PRIMARY KEY, v TEXT)")
    count = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO bench_commit (v) VALUES ('x')")
        conn.execute("COMMIT")
        count += 1
    elapsed = time.perf_counter() - started
    conn.execute("DROP TABLE bench_commit")
    conn.close()
    return count / elapsed


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def wait_until(predicate: Any, timeout: float) -> None:
    deadline = time.perf_counter() + timeout
    while not await predicate():
        if time.perf_counter() > deadline:
            raise SystemExit("timed out waiting for the runs")
        await asyncio.sleep(0.02)


async def main(runs: int, sample: int, db: str) -> None:
    tmp = tempfile.mkdtemp(prefix="signoff-bench-")
    db_path = os.path.join(tmp, "bench.db")
    url = f"sqlite+aiosqlite:///{db_path}" if db == "sqlite" else db
    await upgrade_to_head(url)
    text = (
        f"database: {{url: '{url}'}}\n"
        "server: {workers: 32, leaseSeconds: 60, pollSeconds: 0.5}\n"
        "people: {ann: {email: ann@example.com}}\n" + WORKFLOW
    )
    config = parse_config(text, {})
    act = ActClock()
    engine = Engine(config, EngineOptions(extra_connectors={"act": act}))
    await engine.start()
    agent = Principal(name="token:bench", role=Role.AGENT, token="bench")
    approver = Principal(name="ann", role=Role.APPROVER, person="ann")
    await asyncio.sleep(0.2)
    gc.collect()
    idle_tasks = len(asyncio.all_tasks())
    rss_before = rss_bytes()

    # -- park ------------------------------------------------------------------------------------
    started = time.perf_counter()
    run_ids: list[str] = []
    for i in range(runs):
        run, _ = await engine.runs.start_run("bench", {"n": i}, agent)
        run_ids.append(run.id)

    async def all_parked() -> bool:
        return await engine.store.count_runs(RunStatus.WAITING) >= runs

    await wait_until(all_parked, timeout=max(600, runs / 10))
    park_seconds = time.perf_counter() - started
    await asyncio.sleep(0.3)
    gc.collect()
    parked_tasks = len(asyncio.all_tasks())
    rss_after = rss_bytes()

    requests = await engine.store.list_takeovers(statuses=[TakeoverStatus.PENDING], limit=runs + 10)
    by_run = {r.run_id: r.id for r in requests}

    # -- one release at a time: release-to-act latency ------------------------------------------
    latencies: list[float] = []
    for run_id in run_ids[:sample]:
        await engine.approvals.grant(by_run[run_id], approver, release=True)
        released = time.perf_counter()
        while run_id not in act.called:
            await asyncio.sleep(0.0005)
        latencies.append((act.called[run_id] - released) * 1000)

    # -- decisions per second: the rest, 32 at a time, workers paused -------------------------
    # Deciding and resuming compete for one writer; measure each on its own, then together.
    await engine.workers.stop()
    rest = run_ids[sample:]
    half = len(rest) // 2
    queue = iter(rest[:half])

    async def decide() -> None:
        for run_id in queue:
            await engine.approvals.grant(by_run[run_id], approver, release=True)

    started = time.perf_counter()
    await asyncio.gather(*(decide() for _ in range(32)))
    decide_seconds = time.perf_counter() - started

    engine.workers.start()
    done_before = await engine.store.count_runs(RunStatus.COMPLETED)

    async def resumed() -> bool:
        return await engine.store.count_runs(RunStatus.COMPLETED) >= done_before + half

    started = time.perf_counter()
    await wait_until(resumed, timeout=max(600, runs / 10))
    resume_seconds = time.perf_counter() - started

    # -- both at once: the other half decided while workers resume them ----------------------
    queue = iter(rest[half:])
    started = time.perf_counter()
    await asyncio.gather(*(decide() for _ in range(32)))
    mixed_decide_seconds = time.perf_counter() - started

    async def all_done() -> bool:
        return await engine.store.count_runs(RunStatus.COMPLETED) >= runs

    await wait_until(all_done, timeout=max(600, runs / 10))
    mixed_seconds = time.perf_counter() - started
    await engine.stop()
    commit_rate = bare_commit_rate(db_path) if db == "sqlite" else float("nan")

    decisions = half / decide_seconds if half else float("nan")
    mixed = len(rest) - half
    print(f"runs                         {runs}")
    print(f"park rate                    {runs / park_seconds:,.0f} runs/s")
    print(f"asyncio tasks idle / parked  {idle_tasks} / {parked_tasks}")
    print(
        f"RSS before / after parking   {rss_before / 2**20:.1f} MiB / {rss_after / 2**20:.1f} MiB"
        f"  (+{(rss_after - rss_before) / 2**20:.1f} MiB)"
    )
    print(f"bytes per parked run         {(rss_after - rss_before) / runs:,.0f}")
    print(f"decisions/s (32 concurrent)  {decisions:,.0f}   (workers paused, n={half})")
    print(f"resume rate                  {half / resume_seconds:,.0f} runs/s (decided runs -> act)")
    print(
        f"decide while resuming        {mixed / mixed_decide_seconds:,.0f} decisions/s, "
        f"{mixed / mixed_seconds:,.0f} runs/s completed (n={mixed})"
    )
    print(
        f"release-to-act, one at a time (n={len(latencies)}): "
        f"p50 {statistics.median(latencies):.2f} ms, p99 {pct(latencies, 99):.2f} ms"
    )
    if db == "sqlite":
        print(f"bare single-row commits/s    {commit_rate:,.0f}")
        print(f"ratio decisions/commits      {decisions / commit_rate:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--db", default="sqlite", help="sqlite (a temp file) or a database URL")
    args = parser.parse_args()
    asyncio.run(main(args.runs, min(args.sample, args.runs), args.db))
