"""A real server process is killed (SIGKILL) while a step is inside a connector call; a new
process takes the run over when the lease runs out and finishes it. Steps that completed never
run again; the interrupted step is retried with the same ``Idempotency-Key``.

This is the slow test of the suite: the lease is ``server.leaseSeconds`` (at least 5 s), and the
new process may only take the run over once the dead one's lease has run out.
"""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.support.process import Server, call, cli, free_port
from tests.support.waiting import within

pytestmark = pytest.mark.slow

LEASE_SECONDS = 5


@dataclass
class FakeRemote:
    """The remote service of the ``http`` connector: it records each request's Idempotency-Key
    and holds the first request open until told to answer."""

    keys: list[str] = field(default_factory=list)
    bodies: list[Any] = field(default_factory=list)
    first_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    answer_first: asyncio.Event = field(default_factory=asyncio.Event)
    url: str = ""

    async def charge(self, request: web.Request) -> web.Response:
        key = request.headers.get("Idempotency-Key", "")
        self.keys.append(key)
        self.bodies.append(await request.json())
        if len(self.keys) == 1:
            self.first_arrived.set()
            await self.answer_first.wait()
        # A real service answers a retried key with the result it already gave.
        return web.json_response({"charged": True, "key": key, "amount": 42})


@pytest.fixture
async def remote() -> AsyncIterator[FakeRemote]:
    fake = FakeRemote()
    app = web.Application()
    app.router.add_post("/charge", fake.charge)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    fake.url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        fake.answer_first.set()  # let a request the dead server left open finish
        await runner.cleanup()


def app_yaml(db_url: str, port: int, remote_url: str) -> str:
    return textwrap.dedent(
        f"""\
        database: {{url: '{db_url}'}}
        server: {{host: 127.0.0.1, port: {port}, workers: 4, leaseSeconds: {LEASE_SECONDS},
                  pollSeconds: 0.1}}
        people:
          alice: {{email: alice@example.com}}
        admins: [alice]
        connectors:
          remote:
            type: http
            baseUrl: {remote_url}
            timeoutSeconds: 120
            actions:
              charge: {{kind: write, method: POST, path: /charge}}
        workflows:
          crashy:
            nodes:
              - {{id: before, type: connector, connector: demo-ledger, action: note,
                 args: {{text: "charging {{{{ input.order }}}}"}}}}
              - {{id: charge, type: connector, connector: remote, action: charge,
                 args: {{order: "{{{{ input.order }}}}"}}}}
              - {{id: after, type: connector, connector: demo-ledger, action: refund,
                 args: {{order: "{{{{ input.order }}}}",
                        amount: "{{{{ steps.charge.output.amount }}}}"}}}}
        """
    )


async def test_killed_mid_step_resumes_with_the_same_idempotency_key(
    db_url: str, tmp_path: Path, remote: FakeRemote
) -> None:
    config = tmp_path / "app.yaml"
    port = free_port()
    config.write_text(app_yaml(db_url, port, remote.url))
    await cli(config, "migrate")
    agent = await cli(config, "token", "create", "--role", "agent", "--name", "agent")
    agent = agent.strip().splitlines()[-1]
    admin = await cli(
        config, "token", "create", "--role", "admin", "--name", "ops", "--person", "alice"
    )
    admin = admin.strip().splitlines()[-1]

    log = tmp_path / "server.log"
    first, second = Server(config, port, log), Server(config, port, log)
    try:
        await first.start()
        async with aiohttp.ClientSession() as http:
            status, run = await call(
                http,
                "POST",
                first.base + "/v1/runs",
                agent,
                {"workflow": "crashy", "input": {"order": "o-7"}},
            )
            assert status == 201, run
            run_id = run["id"]
            await asyncio.wait_for(remote.first_arrived.wait(), 30)
        await first.kill()  # mid-call: step_started is committed, step_completed is not
        assert len(remote.keys) == 1

        await second.start()
        async with aiohttp.ClientSession() as http:

            async def ended() -> bool:
                nonlocal run
                status, run = await call(http, "GET", f"{second.base}/v1/runs/{run_id}", agent)
                assert status == 200, run
                return run["status"] in ("completed", "failed", "cancelled")

            run: dict = {}
            ended_in_time = await within(ended, LEASE_SECONDS + 25)
            assert ended_in_time, (run, log.read_text())
            assert run["status"] == "completed", (run, log.read_text())
            _, ledger = await call(http, "GET", f"{second.base}/v1/ledger?runId={run_id}", admin)
            _, journal = await call(http, "GET", f"{second.base}/v1/runs/{run_id}/journal", agent)
    finally:
        await first.kill()
        await second.stop()

    # The interrupted step was retried once, with the key of its first attempt.
    assert remote.keys == [f"{run_id}:charge:1"] * 2
    assert remote.bodies == [{"order": "o-7"}] * 2
    # Each completed step's side effect happened exactly once.
    entries = ledger["entries"]
    assert [(e["stepId"], e["action"]) for e in entries] == [
        ("before", "note"),
        ("after", "refund"),
    ]
    assert [e["idempotencyKey"] for e in entries] == [
        f"{run_id}:before:1",
        f"{run_id}:after:1",
    ]
    assert entries[1]["args"] == {"order": "o-7", "amount": 42}
    assert run["output"]["action"] == "refund"
    events = [(e["event"], e["stepId"]) for e in journal["events"]]
    for step in ("before", "charge", "after"):
        assert events.count(("step_started", step)) == 1, events
        assert events.count(("step_completed", step)) == 1, events
    assert events.count(("run_completed", None)) == 1
    assert not [e for e in events if e[0] == "step_failed"]
