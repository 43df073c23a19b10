"""Teams ``Action.Execute`` invoke-to-response latency under a steady load; prints the figures.

    python bench/teams_invoke.py [--rate 50] [--seconds 30] [--db sqlite|URL] [--verb grant]

The whole server runs as in production (aiohttp on a loopback port, the engine's workers,
outbox dispatcher and sweeper, SQLite or PostgreSQL), with a fake Bot Connector on loopback as
the ``serviceUrl`` (it records posts and enforces Teams' rate limits, as in the tests). First
``rate * seconds`` runs are parked at an approval whose card goes to a Teams channel. Then, open
loop, ``rate`` Approve clicks per second (each a different request, from one of 9 approvers)
are sent as Teams sends them; each is a real decision: one conditional UPDATE, the run queued,
the updated card rendered into the invoke response. Meanwhile the released runs execute and the
outbox updates cards and posts notices, as it would.

``--verb refresh`` sends card refreshes instead (the same SDK path, authorization aside, and a
read instead of a decision): the invoke path without the engine's work behind each decision.

Figures (printed, never asserted; the issue's target is p99 under 150 ms at 50/s): latency
p50/p90/p99/max from sending the invoke to reading the response, the achieved rate, and how
many responses were not a decided card.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
from aiohttp.test_utils import TestServer

from bot.app import create_app
from bot.keys import ENGINE
from engine.adapters.store.migrate import upgrade_to_head
from engine.assembly import EngineOptions
from engine.config import parse_config
from engine.domain.model import Principal, Role, RunStatus, TakeoverStatus
from tests.fakes.teams import FakeConnector

CHANNEL = "19:benchchannel0000000000000000000@thread.tacv2"
APPROVERS = [f"p{i}" for i in range(9)]
WORKFLOW = """
refund:
  nodes:
    - {id: approve, type: approval, reason: "Refund {{ input.amount }} for {{ input.order }}",
       approvers: [finance], channels: [teams:bench], timeoutMinutes: 120}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}}
"""


def config_text(db_url: str) -> str:
    people = "\n".join(f"  {p}: {{email: {p}@example.com, teams: aad-{p}}}" for p in APPROVERS)
    return (
        f"database: {{url: '{db_url}'}}\n"
        "server: {workers: 8, publicUrl: 'http://127.0.0.1:8080'}\n"
        "teams: {insecureLocalDev: true}\n"  # the bench's invokes are unsigned
        f"people:\n{people}\n"
        f"groups:\n  finance: [{', '.join(APPROVERS)}]\n"
        "admins: [p0]\n"
        "workflows:\n" + textwrap.indent(textwrap.dedent(WORKFLOW), "  ")
    )


def activity(service_url: str, kind: str, user: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "id": f"{time.monotonic_ns()}",
        "channelId": "msteams",
        "serviceUrl": service_url,
        "from": {"id": f"29:{user}", "name": user, "aadObjectId": f"aad-{user}"},
        "recipient": {"id": "28:bench-bot", "name": "Signoff"},
        "conversation": {"id": CHANNEL, "conversationType": "channel", "tenantId": "t"},
        "channelData": {"tenant": {"id": "t"}},
        **fields,
    }


async def open_loop(send: Any, rate: float, count: int) -> float:
    """Start ``send(i)`` ``rate`` times a second whether or not earlier ones finished (an open
    loop, as clicks arrive); returns the seconds until all have finished."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    tasks = []
    for i in range(count):
        delay = t0 + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(send(i)))
    await asyncio.gather(*tasks)
    return loop.time() - t0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(rate: float, seconds: float, db: str, verb: str = "grant") -> None:
    count = int(rate * seconds)
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite+aiosqlite:///{tmp}/bench.db" if db == "sqlite" else db
        await upgrade_to_head(db_url)
        config = parse_config(config_text(db_url), {})
        async with FakeConnector() as connector:
            app = create_app(config, EngineOptions(owner="bench"))
            server = TestServer(app, host="127.0.0.1")
            await server.start_server()
            engine = app[ENGINE]
            url = f"http://127.0.0.1:{server.port}/api/messages"
            try:
                async with aiohttp.ClientSession() as http:
                    await run(http, url, engine, connector, rate, count, verb)
            finally:
                await server.close()


async def run(
    http: aiohttp.ClientSession,
    url: str,
    engine: Any,
    connector: FakeConnector,
    rate: float,
    count: int,
    verb: str,
) -> None:
    service = connector.service_url
    install = activity(service, "conversationUpdate", "p0", membersAdded=[{"id": "28:bench-bot"}])
    subscribe = activity(service, "message", "p0", text="subscribe bench")
    for body in (install, subscribe):
        async with http.post(url, json=body) as resp:
            assert resp.status == 200, await resp.text()

    print(f"parking {count} runs ...", flush=True)
    agent = Principal(name="token:agent", role=Role.AGENT, token="agent")
    started = time.perf_counter()
    runs = [
        (await engine.runs.start_run("refund", {"order": f"A-{i}", "amount": i}, agent))[0].id
        for i in range(count)
    ]
    while await engine.store.count_runs(RunStatus.WAITING) < count:
        await asyncio.sleep(0.2)
    requests = await engine.store.list_takeovers(statuses=[TakeoverStatus.PENDING], limit=count + 1)
    print(f"parked {count} runs in {time.perf_counter() - started:.1f} s", flush=True)
    by_run = {r.run_id: r.id for r in requests}
    request_ids = [by_run[run_id] for run_id in runs]

    latencies: list[float] = []
    failures: list[str] = []

    async def click(i: int) -> None:
        body = activity(
            service,
            "invoke",
            APPROVERS[i % len(APPROVERS)],
            name="adaptiveCard/action",
            value={
                "action": {
                    "type": "Action.Execute",
                    "verb": verb,
                    "data": {"requestId": request_ids[i]},
                },
                "trigger": "manual",
            },
        )
        sent = time.perf_counter()
        async with http.post(url, json=body) as resp:
            answer = await resp.json()
        latencies.append(time.perf_counter() - sent)
        value = answer.get("value") if isinstance(answer, dict) else None
        expected = "Approved by" if verb == "grant" else "Approval needed"
        if resp.status != 200 or not isinstance(value, dict) or expected not in str(value):
            failures.append(f"{resp.status}: {str(answer)[:200]}")

    # The same open loop against GET /healthz first: what the machine gives a trivial request
    # right now (these machines are shared), to read the invoke figures against.
    health = url.replace("/api/messages", "/healthz")
    baseline: list[float] = []

    async def ping(_: int) -> None:
        sent = time.perf_counter()
        async with http.get(health) as resp:
            await resp.read()
        baseline.append((time.perf_counter() - sent) * 1000)

    await open_loop(ping, rate, int(rate * 5))
    print(f"sending {count} {verb} invokes at {rate:g}/s ...", flush=True)
    elapsed = await open_loop(click, rate, count)

    ms = [x * 1000 for x in latencies]
    print()
    print(f"invokes: {len(ms)} in {elapsed:.1f} s ({len(ms) / elapsed:.1f}/s achieved)")
    print(
        f"invoke-to-response latency: p50 {percentile(ms, 0.50):.1f} ms, "
        f"p90 {percentile(ms, 0.90):.1f} ms, p99 {percentile(ms, 0.99):.1f} ms, "
        f"max {max(ms):.1f} ms, mean {statistics.mean(ms):.1f} ms"
    )
    print(
        f"baseline GET /healthz at the same rate: p50 {percentile(baseline, 0.5):.1f} ms, "
        f"p99 {percentile(baseline, 0.99):.1f} ms"
    )
    print(f"target: p99 < 150 ms -> {'met' if percentile(ms, 0.99) < 150 else 'NOT met'}")
    print(f"responses that were not the expected card: {len(failures)}")
    for failure in failures[:5]:
        print("  ", failure)
    done = await engine.store.count_runs(RunStatus.COMPLETED)
    print(
        f"runs completed by the end: {done} of {count}; posts to the fake connector: "
        f"{len(connector.calls)} (throttled {len(connector.throttled)})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="invokes per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to send")
    parser.add_argument("--db", default="sqlite", help="sqlite, or a PostgreSQL URL")
    parser.add_argument("--verb", choices=["grant", "refresh"], default="grant")
    args = parser.parse_args()
    asyncio.run(main(args.rate, args.seconds, args.db, args.verb))
