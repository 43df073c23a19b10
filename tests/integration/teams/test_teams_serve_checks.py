"""``signoff serve`` and the Teams switches, through the real CLI (issue 29, items 4 and 11).

* ``teams.insecureLocalDev`` accepts unsigned activities, so ``serve`` refuses to start (one
  ``config error`` line naming the key, exit 2) unless the address it actually listens on is
  loopback, whatever chose that address: ``--host`` included, which the config never sees.
* ``insecureLocalDev`` with ``TEAMS_APP_TENANT_ID`` set and no app id starts (no SDK traceback)
  and holds unsigned activities to that tenant; an app id with a tenant but no password (a
  single-tenant app cannot sign in) is one ``config error`` line, not the SDK's traceback.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.teams import FakeConnector
from tests.support.process import ROOT, Server, child_env, cli, free_port, run_cli

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
OTHER = "0b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b"
STARTUP = 30.0  # seconds for a refused start, or for a started server to answer


def lan_address() -> str | None:
    """A non-loopback address of this machine (a UDP connect sends nothing)."""
    for probe in ("192.0.2.1", "10.255.255.255", "8.8.8.8"):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))
                address: str = s.getsockname()[0]
        except OSError:
            continue
        if not address.startswith("127.") and address != "0.0.0.0":
            return address
    return None


def write_config(tmp_path: Path, port: int, teams: str) -> Path:
    config = tmp_path / "app.yaml"
    config.write_text(
        f"database: {{url: 'sqlite+aiosqlite:///{tmp_path / 'signoff.db'}'}}\n"
        f"server: {{host: 127.0.0.1, port: {port}, pollSeconds: 0.1}}\n"
        "people: {alice: {email: alice@example.com, teams: aad-alice}}\n"
        "admins: [alice]\n" + teams
    )
    return config


def gate_overrides(tmp_path: Path) -> int:
    conn = sqlite3.connect(tmp_path / "signoff.db")
    try:
        count: int = conn.execute("SELECT count(*) FROM gate_overrides").fetchone()[0]
        return count
    finally:
        conn.close()


def message(text: str, service_url: str, tenant: str = TENANT) -> dict[str, Any]:
    """A personal-chat message from alice, as Teams (or the Agents Playground) sends it."""
    return {
        "type": "message",
        "id": "1700000000001",
        "channelId": "msteams",
        "serviceUrl": service_url,
        "text": text,
        "from": {"id": "29:1alice", "name": "Alice", "aadObjectId": "aad-alice"},
        "recipient": {"id": "28:bot", "name": "Signoff"},
        "conversation": {
            "id": "a:1alice-personal",
            "conversationType": "personal",
            "tenantId": tenant,
        },
        "channelData": {"tenant": {"id": tenant}},
    }


async def post(http: aiohttp.ClientSession, url: str, activity: dict[str, Any]) -> tuple[int, Any]:
    async with http.post(
        url, data=json.dumps(activity).encode(), headers={"Content-Type": "application/json"}
    ) as resp:
        text = await resp.text()
        return resp.status, text


def targets() -> list[Any]:
    lan = lan_address()
    return [
        pytest.param("0.0.0.0", "127.0.0.1", id="all IPv4 interfaces"),
        pytest.param("::", "[::1]", id="all IPv6 interfaces"),
        pytest.param(
            lan or "",
            lan or "",
            id="a LAN address",
            marks=pytest.mark.skipif(lan is None, reason="no non-loopback address here"),
        ),
    ]


@pytest.mark.parametrize(("host", "reach"), targets())
async def test_insecure_local_dev_refuses_to_serve_beyond_loopback(
    tmp_path: Path, host: str, reach: str
) -> None:
    port = free_port()
    config = write_config(tmp_path, port, "teams: {insecureLocalDev: true}\n")
    await cli(config, "migrate")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "serve",
        "--config",
        str(config),
        "--host",
        host,
        cwd=ROOT,
        env=child_env(TEAMS_APP_ID=""),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    base = f"http://{reach}:{port}"
    answers: list[int] = []
    try:
        async with aiohttp.ClientSession() as http:
            deadline = asyncio.get_running_loop().time() + STARTUP
            while proc.returncode is None and asyncio.get_running_loop().time() < deadline:
                try:
                    async with http.get(base + "/healthz") as resp:
                        up = resp.status == 200
                except aiohttp.ClientError:
                    up = False
                if up:
                    # What anyone on the network could send: the admin's "gate" command.
                    status, _ = await post(
                        http,
                        base + "/api/messages",
                        message("gate threshold 0.1", "http://127.0.0.1:9/"),
                    )
                    answers.append(status)
                    break
                try:
                    await asyncio.wait_for(proc.wait(), 0.1)
                except TimeoutError:
                    pass
    finally:
        if proc.returncode is None:
            proc.kill()
        _, err_bytes = await proc.communicate()
    err = err_bytes.decode()
    assert answers == [], f"it served on {host} and answered {answers}"
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("config error: teams.insecureLocalDev: ") and host in lines[0]
    assert gate_overrides(tmp_path) == 0


async def test_insecure_local_dev_on_loopback_still_serves(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path, port, "teams: {insecureLocalDev: true}\n")
    await cli(config, "migrate")
    server = Server(config, port, tmp_path / "server.log", env={"TEAMS_APP_ID": ""})
    await server.start()
    try:
        async with FakeConnector() as fake, aiohttp.ClientSession() as http:
            status, _ = await post(
                http, server.base + "/api/messages", message("gate threshold 0.4", fake.service_url)
            )
            assert status == 200
    finally:
        assert await server.stop() == 0
    assert gate_overrides(tmp_path) == 1


async def test_insecure_local_dev_with_a_tenant_and_no_app_id_serves(tmp_path: Path) -> None:
    # The default app.yaml's teams line, with TEAMS_APP_TENANT_ID left set for the Playground.
    teams = (
        'teams: {appId: "${TEAMS_APP_ID:-}", appPassword: "${TEAMS_APP_PASSWORD:-}", '
        'tenantId: "${TEAMS_APP_TENANT_ID:-}", insecureLocalDev: true}\n'
    )
    port = free_port()
    config = write_config(tmp_path, port, teams)
    await cli(config, "migrate")
    log = tmp_path / "server.log"
    env = {"TEAMS_APP_ID": "", "TEAMS_APP_PASSWORD": "", "TEAMS_APP_TENANT_ID": TENANT}
    server = Server(config, port, log, env=env)
    await server.start()
    try:
        async with FakeConnector() as fake, aiohttp.ClientSession() as http:
            url = server.base + "/api/messages"
            status, body = await post(
                http, url, message("gate threshold 0.3", fake.service_url, OTHER)
            )
            assert status == 403 and "wrong_tenant" in body, body
            assert gate_overrides(tmp_path) == 0
            status, _ = await post(http, url, message("gate threshold 0.3", fake.service_url))
            assert status == 200
            assert gate_overrides(tmp_path) == 1
            await fake.wait_for(lambda c: c.posts())  # the reply reached the "Playground"
    finally:
        assert await server.stop() == 0
    text = log.read_text()
    assert "Traceback" not in text, text
    assert f"only activities naming tenant {TENANT}" in text


async def test_a_single_tenant_app_without_a_password_is_one_config_error(tmp_path: Path) -> None:
    teams = f"teams: {{appId: 5d2f1e0a-3b4c-4d5e-8f90-a1b2c3d4e5f6, tenantId: '{TENANT}'}}\n"
    config = write_config(tmp_path, free_port(), teams)
    code, _, err = await run_cli("serve", "--config", str(config), env=child_env())
    assert code == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("config error: teams.appPassword: "), line
