"""Click-to-ack latency of Slack's Approve button under load; prints the figures.

    python bench/slack_ack.py [--rate 100] [--seconds 30] [--channels 10]

A server process runs Signoff on SQLite (workers, outbox dispatcher, the bolt endpoint) with
``slack.apiBaseUrl`` on a fake Slack Web API served by this process. The server first parks
``rate * seconds`` runs at an approval (their cards go out through the outbox), then this
process sends signed ``block_actions`` Approve clicks, one per request, at ``rate`` per second
(open loop: a slow answer does not slow the sender) and measures, per click, the time from
sending the request to reading Slack's acknowledgement. Each ack means the grant + release was
committed; meanwhile the server resumes the approved runs and delivers their card updates,
decision notices and step results to the fake, so the clicks compete with that work.

Figures (printed, never asserted): p50 / p99 / max ack latency, the rate achieved, non-200
answers, and how long the server took to post every step result after the last click.
Target (issue 5): p99 under 100 ms at 100 clicks/s for 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.slack import FakeSlack  # noqa: E402

SECRET = "bench-signing-secret"
APPROVERS = {f"appr{i:02d}": f"U0APPR{i:03d}" for i in range(20)}


def config_text(db_url: str, slack_api: str, channels: int) -> str:
    people = "".join(f"  {name}: {{slack: {uid}}}\n" for name, uid in APPROVERS.items())
    flows = "".join(
        f"  bench{c}:\n"
        "    nodes:\n"
        f"      - {{id: approve, type: approval, approvers: [deciders], "
        f"channels: ['slack:C0BENCH{c:03d}'], timeoutMinutes: 600}}\n"
        "      - {id: act, type: connector, connector: demo-ledger, action: note,"
        " args: {n: '{{ input.n }}'}}\n"
        for c in range(channels)
    )
    return (
        f"database: {{url: '{db_url}'}}\n"
        "server: {workers: 16, leaseSeconds: 30, pollSeconds: 0.2, "
        "secretKey: bench-secret-key-0123456789abcdef}\n"
        f"slack: {{botToken: xoxb-fake-token, signingSecret: {SECRET}, "
        f"apiBaseUrl: '{slack_api}'}}\n"
        f"people:\n{people}"
        f"groups:\n  deciders: [{', '.join(APPROVERS)}]\n"
        f"workflows:\n{flows}"
    )


# -- the server process ----------------------------------------------------------------------


async def serve(
    config_path: str, state_path: str, runs: int, channels: int, min_interval: float
) -> None:
    from aiohttp import web

    from bot.app import create_app
    from bot.keys import ENGINE
    from engine.assembly import EngineOptions
    from engine.config import parse_config
    from engine.domain.model import Principal, Role, TakeoverStatus

    config = parse_config(Path(config_path).read_text(), {})
    app = create_app(config, EngineOptions(owner="bench-server"))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    engine = app[ENGINE]
    engine.dispatcher.sinks["slack"].min_interval = min_interval
    agent = Principal(name="token:bench", role=Role.AGENT, token="bench")
    for start in range(0, runs, 200):
        await asyncio.gather(
            *(
                engine.runs.start_run(f"bench{i % channels}", {"n": i}, agent)
                for i in range(start, min(runs, start + 200))
            )
        )
    while True:  # every run parked (their cards go out at the channels' pace meanwhile)
        pending = await engine.store.list_takeovers(
            statuses=[TakeoverStatus.PENDING], limit=runs + 1
        )
        if len(pending) == runs:
            break
        await asyncio.sleep(0.2)
    port = runner.addresses[0][1]
    Path(state_path).write_text(json.dumps({"port": port, "requests": [r.id for r in pending]}))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()


# -- the clicking process --------------------------------------------------------------------


def click_body(request_id: str, user: str, n: int, response_url: str) -> str:
    payload = {
        "type": "block_actions",
        "team": {"id": "T0BENCH", "domain": "bench"},
        "user": {"id": user, "team_id": "T0BENCH"},
        "api_app_id": "A0BENCH",
        "trigger_id": f"trigger-{n}",
        "container": {"type": "message", "channel_id": "C0BENCH000", "message_ts": "1.0"},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": "signoff_grant",
                "value": request_id,
                "block_id": "actions",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})


def signed(body: str) -> dict[str, str]:
    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
    }


async def fire(
    session: aiohttp.ClientSession,
    count: int,
    rate: float,
    request: Any,
) -> tuple[list[float], list[int], float]:
    """Send ``count`` requests at ``rate`` per second, open loop; ``request(n)`` makes the
    n-th (method, url, body, headers). Returns latencies (s), statuses and the sending time."""
    latencies: list[float] = []
    statuses: list[int] = []

    async def one(n: int) -> None:
        method, url, body, headers = request(n)
        started = time.perf_counter()
        async with session.request(method, url, data=body, headers=headers) as resp:
            await resp.read()
            statuses.append(resp.status)
        latencies.append(time.perf_counter() - started)

    tasks = []
    began = time.perf_counter()
    for n in range(count):
        delay = began + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(n)))
    await asyncio.gather(*tasks)
    return latencies, statuses, time.perf_counter() - began


def pct(seconds: list[float], p: float) -> float:
    """The ``p``-th percentile, in milliseconds."""
    ordered = sorted(seconds)
    return 1000 * ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def bench(rate: float, seconds: float, channels: int, min_interval: float) -> None:
    from engine.adapters.store import Database, SqlStore
    from engine.adapters.store.migrate import upgrade_to_head
    from engine.domain.model import RunStatus

    runs = int(rate * seconds)
    workdir = Path(tempfile.mkdtemp(prefix="signoff-slack-ack-"))
    db_url = f"sqlite+aiosqlite:///{workdir}/signoff.db"
    await upgrade_to_head(db_url)
    store = SqlStore(Database(db_url))  # a reader beside the server (SQLite WAL)
    async with FakeSlack() as slack:
        config_path = workdir / "app.yaml"
        config_path.write_text(config_text(db_url, slack.api_url, channels))
        state_path = workdir / "state.json"
        started = time.perf_counter()
        server = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve",
                str(config_path),
                "--state",
                str(state_path),
                "--runs",
                str(runs),
                "--channels",
                str(channels),
                "--min-interval",
                str(min_interval),
            ],
            cwd=ROOT,
        )
        try:
            while not state_path.exists():
                if server.poll() is not None:
                    raise SystemExit(f"the server exited with {server.returncode}")
                await asyncio.sleep(0.2)
            state = json.loads(state_path.read_text())
            print(
                f"parked {runs} runs in {time.perf_counter() - started:.1f} s "
                f"({len(slack.posted())} cards posted so far; {channels} channels, "
                f"outbox pacing {min_interval:g} s per channel)"
            )
            base = f"http://127.0.0.1:{state['port']}"
            users = list(APPROVERS.values())
            requests = state["requests"]

            def click(n: int) -> tuple[str, str, str, dict[str, str]]:
                body = click_body(requests[n], users[n % len(users)], n, slack.response_url(n))
                return "POST", f"{base}/slack/events", body, signed(body)

            def health(n: int) -> tuple[str, str, None, None]:
                return "GET", f"{base}/healthz", None, None

            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
                floor, _, _ = await fire(session, int(rate * 3), rate, health)
                (latencies, statuses, sent_for), (loaded, _, _) = await asyncio.gather(
                    fire(session, runs, rate, click),
                    fire(session, int(seconds * 10), 10, health),
                )
            last_click = time.perf_counter()
            completed = 0
            while time.perf_counter() - last_click < 300:
                completed = len(await store.list_runs(status=RunStatus.COMPLETED, limit=runs + 1))
                if completed >= runs:
                    break
                await asyncio.sleep(0.2)
            resumed_in = time.perf_counter() - last_click
            outbox = await store.outbox_counts()
        finally:
            server.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=30)
            if server.poll() is None:
                server.kill()
            await store.db.dispose()
    count = len(latencies)
    print(f"clicks: {count} in {sent_for:.1f} s ({count / sent_for:.1f}/s, target {rate:g}/s)")
    print(f"non-200 answers: {sum(1 for s in statuses if s != 200)}")
    print(
        f"click-to-ack latency: p50 {pct(latencies, 50):.1f} ms, "
        f"p99 {pct(latencies, 99):.1f} ms, max {pct(latencies, 100):.1f} ms "
        "(target p99 < 100 ms)"
    )
    print(
        f"reference, GET /healthz on the same server: idle p50 {pct(floor, 50):.1f} ms, "
        f"p99 {pct(floor, 99):.1f} ms; during the clicks p50 {pct(loaded, 50):.1f} ms, "
        f"p99 {pct(loaded, 99):.1f} ms"
    )
    print(f"ephemeral answers: {len(slack.responses)} (0 expected: every click decides)")
    print(f"runs completed: {completed}/{runs}, the last {resumed_in:.1f} s after the last click")
    print(
        f"outbox when the server stopped: {outbox.get('sent', 0)} sent, "
        f"{outbox.get('pending', 0)} pending (paced), {outbox.get('failed', 0)} failed"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--channels", type=int, default=10)
    parser.add_argument(
        "--min-interval",
        type=float,
        default=1.0,
        help="outbox pacing per channel in seconds (1.0: Slack's chat.postMessage limit)",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--state", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.state, args.runs, args.channels, args.min_interval))
    else:
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        asyncio.run(bench(args.rate, args.seconds, args.channels, args.min_interval))


if __name__ == "__main__":
    main()
