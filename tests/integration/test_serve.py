"""``signoff serve`` as a process: refusing an unmigrated database, ``--migrate``, health,
readiness, a graceful SIGTERM, and SIGHUP (``signoff reload``) applying ``people:``."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from bot.cli.reload import default_pid_file
from tests.support.process import Server, call, cli, free_port, run_cli
from tests.support.waiting import quiet, within


class SlowRemote:
    """An HTTP service whose every call waits until the test lets it answer."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()
        self.answer = asyncio.Event()
        self.keys: list[str] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.keys.append(request.headers["Idempotency-Key"])
        self.arrived.set()
        await self.answer.wait()
        return web.json_response({"done": True})


@pytest.fixture
async def remote() -> AsyncIterator[SlowRemote]:
    fake = SlowRemote()
    app = web.Application()
    app.router.add_post("/work", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    yield fake
    fake.answer.set()
    await runner.cleanup()


def config_for(
    tmp_path: Path, db_url: str, port: int, remote_url: str = "http://127.0.0.1:9"
) -> Path:
    config = tmp_path / "app.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            database: {{url: '{db_url}'}}
            server: {{host: 127.0.0.1, port: {port}, pollSeconds: 0.1, leaseSeconds: 30}}
            people: {{alice: {{email: alice@example.com}}}}
            admins: [alice]
            connectors:
              remote:
                type: http
                baseUrl: {remote_url}
                actions: {{work: {{kind: write, path: /work}}}}
            workflows:
              slow:
                nodes:
                  - {{id: work, type: connector, connector: remote, action: work, args: {{}}}}
                  - {{id: after, type: connector, connector: demo-ledger, action: note,
                     args: {{text: done}}}}
            """
        )
    )
    return config


async def test_serve_refuses_an_unmigrated_database_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    sqlite3.connect(db).close()  # a file, but never migrated
    config = config_for(tmp_path, f"sqlite+aiosqlite:///{db}", free_port())
    code, out, err = await run_cli("serve", "--config", str(config))
    assert code == 2, out + err
    assert out == ""  # neither "serving" nor a sign-in link
    (line,) = err.strip().splitlines()
    assert line.startswith("error: database not migrated: run `signoff migrate`"), line
    assert "signoff serve --migrate" in line
    with sqlite3.connect(db) as conn:  # it looked, it created nothing
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)


async def test_serve_migrate_migrates_then_serves(tmp_path: Path, db_url: str) -> None:
    port = free_port()
    config = config_for(tmp_path, db_url, port)
    server = Server(config, port, tmp_path / "server.log", args=("--migrate",))
    await server.start(ready_path="/readyz")  # ready: at the newest migration
    try:
        async with aiohttp.ClientSession() as http:
            status, body = await call(http, "GET", server.base + "/readyz", None)
            assert status == 200 and body["status"] == "ok"
            status, body = await call(http, "GET", server.base + "/healthz", None)
            assert status == 200
            async with http.get(server.base + "/metrics") as resp:
                assert resp.status == 200
                assert "signoff_runs" in await resp.text()
    finally:
        assert await server.stop() == 0
    assert "database migrated to revision" in (tmp_path / "server.log").read_text()


async def test_sigterm_lets_the_step_in_flight_finish(
    tmp_path: Path, db_url: str, remote: SlowRemote
) -> None:
    port = free_port()
    config = config_for(tmp_path, db_url, port, remote.url)
    await cli(config, "migrate")
    agent = (await cli(config, "token", "create", "--role", "agent", "--name", "a")).split()[-1]
    admin = (
        await cli(config, "token", "create", "--role", "admin", "--name", "o", "--person", "alice")
    ).split()[-1]
    server = Server(config, port, tmp_path / "server.log")
    await server.start()
    async with aiohttp.ClientSession() as http:
        status, run = await call(
            http, "POST", server.base + "/v1/runs", agent, {"workflow": "slow", "input": {}}
        )
        assert status == 201
        await asyncio.wait_for(remote.arrived.wait(), 20)
        stopping = asyncio.create_task(server.stop())
        await quiet(0.5)  # the process is shutting down while the call is in flight
        assert not stopping.done()
        remote.answer.set()
        assert await stopping == 0, (tmp_path / "server.log").read_text()

    # The step that was in flight finished and was recorded; nothing was cut in half.
    restarted = Server(config, port, tmp_path / "server.log")
    await restarted.start()
    try:
        async with aiohttp.ClientSession() as http:

            async def completed() -> bool:
                nonlocal body
                _, body = await call(http, "GET", f"{restarted.base}/v1/runs/{run['id']}", admin)
                return bool(body["status"] == "completed")

            body = {}
            await within(completed, 20)
            assert body["status"] == "completed", body
            status, journal = await call(
                http, "GET", f"{restarted.base}/v1/runs/{run['id']}/journal", admin
            )
    finally:
        await restarted.stop()
    completed = [e["stepId"] for e in journal["events"] if e["event"] == "step_completed"]
    assert completed == ["work", "after"]
    assert remote.keys == [f"{run['id']}:work:1"]  # called once, never retried


def held_call_config(tmp_path: Path, db_url: str, port: int, server_extra: str = "") -> Path:
    """A config whose refunds are held for a person: ``POST /v1/calls`` answers with an
    ``approvalUrl``."""
    config = tmp_path / "app.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            database: {{url: '{db_url}'}}
            server: {{host: 127.0.0.1, port: {port}{server_extra}}}
            people: {{alice: {{email: alice@example.com}}}}
            admins: [alice]
            policies:
              - {{decision: ask, connector: demo-ledger, action: refund}}
            """
        )
    )
    return config


async def approval_url_served_with_port(config: Path, tmp_path: Path, port: int) -> str:
    """Serve ``config`` with ``--port port``, hold one call, and return its ``approvalUrl``."""
    await cli(config, "migrate")
    agent = (await cli(config, "token", "create", "--role", "agent", "--name", "a")).split()[-1]
    server = Server(config, port, tmp_path / "server.log", args=("--port", str(port)))
    await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            status, held = await call(
                http,
                "POST",
                server.base + "/v1/calls",
                agent,
                {"connector": "demo-ledger", "action": "refund", "args": {"order": "A-1"}},
            )
    finally:
        assert await server.stop() == 0
    assert status == 202, held
    url: str = held["approvalUrl"]
    return url


async def test_links_follow_the_port_given_on_the_command_line(tmp_path: Path, db_url: str) -> None:
    port = free_port()
    config = held_call_config(tmp_path, db_url, 9)  # the config's port is not the one served
    url = await approval_url_served_with_port(config, tmp_path, port)
    assert url.startswith(f"http://127.0.0.1:{port}/approvals/"), url
    assert f"(public URL http://127.0.0.1:{port})" in (tmp_path / "server.log").read_text()


async def test_an_explicit_public_url_is_kept_whatever_the_port(
    tmp_path: Path, db_url: str
) -> None:
    extra = ", publicUrl: 'https://signoff.example.com'"
    config = held_call_config(tmp_path, db_url, 9, extra)
    url = await approval_url_served_with_port(config, tmp_path, free_port())
    assert url.startswith("https://signoff.example.com/approvals/"), url


def people_config(path: Path, db_url: str, port: int, admins: str, server_extra: str = "") -> None:
    path.write_text(
        textwrap.dedent(
            f"""\
            database: {{url: '{db_url}'}}
            server: {{host: 127.0.0.1, port: {port}{server_extra}}}
            people:
              alice: {{email: alice@example.com}}
              carol: {{email: carol@example.com}}
            admins: {admins}
            """
        )
    )


async def test_signoff_reload_and_sighup_apply_people_without_a_restart(
    tmp_path: Path, db_url: str
) -> None:
    port = free_port()
    config = tmp_path / "app.yaml"
    log = tmp_path / "server.log"
    people_config(config, db_url, port, "[alice]")
    await cli(config, "migrate")
    server = Server(config, port, log)
    await server.start()
    pids = default_pid_file(str(config))
    assert pids.read_text().strip() == str(server.proc.pid)  # type: ignore[union-attr]

    def logged(text: str) -> bool:
        return text in log.read_text()

    try:
        async with aiohttp.ClientSession() as http:

            async def ledger(token: str) -> int:
                status, _ = await call(http, "GET", server.base + "/v1/ledger", token)
                return status

            # carol becomes an admin in the file; the server still runs with the old admins.
            people_config(config, db_url, port, "[alice, carol]")
            made = await cli(
                config, "token", "create", "--role", "admin", "--name", "c", "--person", "carol"
            )
            carol = made.split()[-1]
            assert await ledger(carol) == 403

            out = await cli(config, "reload")
            assert f"asked signoff serve (pid {server.proc.pid}) to reload" in out  # type: ignore[union-attr]
            assert await within(lambda: logged(f"reload of {config}: applied admins"), 20)
            assert await ledger(carol) == 200

            # A broken file: `signoff reload` refuses it before signalling, naming the path...
            people_config(config, db_url, port, "[alice, carol, zed]")
            code, out, err = await run_cli("reload", "--config", str(config))
            assert code == 2 and out == "", out + err
            assert 'config error: admins[2]: unknown person or group "zed"' in err, err
            # ... and a SIGHUP sent by hand changes nothing and logs why, with the path.
            server.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
            assert await within(lambda: logged("refused, nothing changed"), 20), log.read_text()
            assert logged('config error: admins[2]: unknown person or group "zed"')
            assert await ledger(carol) == 200

            # A section that cannot change live is reported and kept; the people still apply.
            people_config(config, db_url, port, "[alice]", ", pollSeconds: 0.5")
            server.proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
            assert await within(lambda: logged("server changed but needs a restart"), 20)
            assert await ledger(carol) == 403
            status, _ = await call(http, "GET", server.base + "/readyz", None)
            assert status == 200
    finally:
        assert await server.stop() == 0, log.read_text()
    assert not pids.exists()
    code, _, err = await run_cli("reload", "--config", str(config))
    assert code == 1 and "no signoff serve is running" in err, err
