"""Helpers for the web pages' tests: the demo workflow, forms with their CSRF token, sign-in,
and signed links as local paths."""

from __future__ import annotations

import asyncio
import re
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient, TestServer

from bot.app import create_app
from bot.console.context import PAGES, PageContext
from engine.assembly import Engine, EngineOptions
from engine.config import AppConfig, parse_config
from engine.domain.model import TakeoverRequest, TakeoverStatus
from tests.support.api import Api, serving
from tests.support.clock import ManualClock
from tests.support.engines import PEOPLE, wait_for
from tests.support.ids import SequentialIds
from tests.support.process import free_port


def _app_yaml_workflow(name: str) -> str:
    """One workflow of the shipped ``app.yaml``, as a ``workflows:`` entry: the tests run the
    demo people get, so it cannot drift from what they test."""
    text = (Path(__file__).resolve().parents[2] / "app.yaml").read_text()
    lines = text.split("\nworkflows:\n", 1)[1].splitlines()
    start = lines.index(f"  {name}:")
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if line.strip() and not line.startswith("    "):
            break  # the next workflow or top-level key
        block.append(line)
    return textwrap.dedent("\n".join(block)) + "\n"


REFUND_DEMO = _app_yaml_workflow("refund-demo")
# The demo's connector, with the summary a held refund shows; add ``policies:`` to hold calls.
DEMO_LEDGER = """
connectors:
  demo-ledger:
    type: demo-ledger
    actions:
      lookup: {kind: read}
      refund: {kind: write, summary: "Refund {{ args.amount }} EUR for order {{ args.order }}"}
      note: {kind: write}
"""

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


def local(url: str) -> str:
    """An absolute link of the public URL as a path on the test server."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def web_of(client: TestClient[Any, Any]) -> PageContext:
    app = client.server.app
    assert app is not None
    return app[PAGES]


async def page(client: TestClient[Any, Any], path: str) -> tuple[int, str]:
    resp = await client.get(path, allow_redirects=False)
    return resp.status, await resp.text()


async def submit(
    client: TestClient[Any, Any],
    path: str,
    fields: dict[str, str],
    *,
    csrf_from: str | None = None,
) -> ClientResponse:
    """POST a form the way a browser does after loading ``csrf_from`` (default: ``path``)."""
    _, html = await page(client, csrf_from or path)
    return await client.post(
        path, data={"csrf_token": csrf_of(html), **fields}, allow_redirects=False
    )


async def sign_in(client: TestClient[Any, Any], token: str) -> ClientResponse:
    resp = await submit(client, "/console/login", {"token": token, "next": "/console"})
    assert resp.status == 303, await resp.text()
    return resp


async def pending_request(engine: Engine, run_id: str) -> TakeoverRequest:
    async def found() -> TakeoverRequest | None:
        pending = await engine.store.list_takeovers(
            run_id=run_id, statuses=[TakeoverStatus.PENDING]
        )
        return pending[0] if pending else None

    request: TakeoverRequest = await wait_for(found)
    return request


async def deny_over_api(api: Api, request: TakeoverRequest, person: str, reason: str) -> None:
    """``person`` denies ``request`` through the REST API with their token, giving ``reason``."""
    path = f"/v1/runs/{request.run_id}/takeover/{request.id}/deny"
    status, body = await api.call("POST", path, as_=person, json={"notes": reason})
    assert status == 200, body


def link_path(client: TestClient[Any, Any], request: TakeoverRequest, person: str) -> str:
    return local(web_of(client).links.url(request, person))


def web_config(
    db_url: str, workflows_yaml: str, *, port: int, secret_key: str = "", extra: str = ""
) -> AppConfig:
    """A configuration whose public URL is the test server's real address (links work)."""
    text = (
        f"database: {{url: '{db_url}'}}\n"
        f"server: {{host: 127.0.0.1, port: {port}, workers: 8, leaseSeconds: 30, "
        f"pollSeconds: 0.05, secretKey: '{secret_key}'}}\n"
        + PEOPLE
        + textwrap.dedent(extra)
        + "workflows:\n"
        + textwrap.indent(textwrap.dedent(workflows_yaml), "  ")
    )
    return parse_config(text, {})


@asynccontextmanager
async def running_web(
    db_url: str,
    workflows_yaml: str = REFUND_DEMO,
    *,
    secret_key: str = "",
    clock: ManualClock | None = None,
    extra: str = "",
) -> AsyncIterator[Api]:
    """Like ``tests.support.api.running_api``, on a known port that is also the public URL."""
    port = free_port()
    config = web_config(db_url, workflows_yaml, port=port, secret_key=secret_key, extra=extra)
    options = EngineOptions(
        clock=clock or ManualClock(), ids=SequentialIds("id"), owner="web-worker"
    )
    server = TestServer(create_app(config, options), host="127.0.0.1", port=port)
    async with serving(server) as api:
        yield api


async def read_events(stream: Any, *, until: str, timeout: float = 10.0) -> list[tuple[str, str]]:
    """SSE events as (event, data) until one named ``until`` arrived."""
    events: list[tuple[str, str]] = []
    event, data = "message", []
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        remaining = deadline - asyncio.get_running_loop().time()
        line = (await asyncio.wait_for(stream.content.readline(), remaining)).decode()
        if line in ("\n", ""):
            if data:
                events.append((event, "\n".join(data)))
                if event == until:
                    return events
            event, data = "message", []
            if line == "":
                raise AssertionError(f"stream ended before {until!r}: {events}")
            continue
        field, _, value = line.rstrip("\n").partition(": ")
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)


def base_url(api: Any) -> str:
    """Where a browser finds the served app of ``api`` (a ``tests.support.api.Api``)."""
    return str(api.client.make_url("")).rstrip("/")
