"""A real aiohttp server (on a loopback port) around a real engine, and tokens to call it."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient, TestServer

from bot.app import create_app
from bot.keys import ENGINE
from bot.tokens import hash_token, new_token
from engine.assembly import Engine, EngineOptions
from engine.config import parse_config
from engine.domain.model import Role
from tests.support.clock import ManualClock
from tests.support.engines import PEOPLE
from tests.support.ids import SequentialIds


@dataclass
class Api:
    client: TestClient[Any, Any]
    engine: Engine
    tokens: dict[str, str]

    async def call(
        self, method: str, path: str, *, as_: str | None = None, json: Any = None
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.tokens[as_]}"} if as_ else {}
        resp: ClientResponse = await self.client.request(method, path, json=json, headers=headers)
        body = await resp.json() if resp.content_type == "application/json" else await resp.text()
        return resp.status, body

    async def token(self, name: str, role: Role, person: str | None = None) -> str:
        token = new_token()
        await self.engine.store.create_token(
            name, role, person, hash_token(token), self.engine.clock.now()
        )
        self.tokens[name] = token
        return token


def config_text(db_url: str, workflows_yaml: str, extra: str = "", server: str = "") -> str:
    """A config around ``workflows_yaml``; ``server`` adds keys to the server mapping."""
    return (
        f"database: {{url: '{db_url}'}}\n"
        "server: {workers: 8, leaseSeconds: 30, pollSeconds: 0.05, "
        f"publicUrl: 'http://signoff.test'{', ' + server if server else ''}}}\n"
        + PEOPLE
        + textwrap.dedent(extra)
        + "workflows:\n"
        + textwrap.indent(textwrap.dedent(workflows_yaml), "  ")
    )


@asynccontextmanager
async def running_api(
    db_url: str,
    workflows_yaml: str,
    *,
    extra: str = "",
    server: str = "",
    clock: ManualClock | None = None,
    **options: Any,
) -> AsyncIterator[Api]:
    config = parse_config(config_text(db_url, workflows_yaml, extra, server), {})
    opts = EngineOptions(
        clock=clock or ManualClock(), ids=SequentialIds("id"), owner="api-worker", **options
    )
    async with serving(TestServer(create_app(config, opts))) as api:
        yield api


@asynccontextmanager
async def serving(server: TestServer) -> AsyncIterator[Api]:
    """Start ``server`` (an app around an engine) with the tokens the tests act as: agent,
    admin (alice), and the approvers bob, carol and dave."""
    client: TestClient[Any, Any] = TestClient(server)
    await client.start_server()
    api = Api(client, server.app[ENGINE], {})
    await api.token("agent", Role.AGENT)
    await api.token("admin", Role.ADMIN, "alice")
    for name in ("bob", "carol", "dave"):
        await api.token(name, Role.APPROVER, name)
    try:
        yield api
    finally:
        await client.close()
