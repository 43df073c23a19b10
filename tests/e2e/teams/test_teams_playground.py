"""End to end against the Microsoft 365 Agents Playground, a local Teams look-alike that renders
Adaptive Cards, mocks the Bot Connector and sends the bot real Teams activities.

Signoff runs with empty Teams credentials and ``teams.insecureLocalDev: true`` on loopback (the
playground sends no JWT; without the switch ``/api/messages`` is not mounted), and the
playground is pointed at it. Through the playground's own HTTP/WebSocket interface (what its
web client uses): install the bot, subscribe the conversation, run a workflow, see the approval
card arrive, click Approve, and see the clicker's card replaced, the message updated for
everyone, the step run once and its result posted.

Network safety (PLATFORM.md): the playground listens on all interfaces and its Application
Insights SDK starts even with --disable-telemetry, so it runs under ``loopback.cjs`` (every
``listen()`` binds 127.0.0.1, every non-loopback connect is refused) with
``APPLICATION_INSIGHTS_NO_STATSBEAT=1``. Needs ``npm ci --prefix tests/e2e/teams``; skips without
node or the package, unless ``SIGNOFF_REQUIRE_PLAYGROUND=1`` (CI), where it fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import aiohttp
import jsonschema
import pytest
from aiohttp.test_utils import TestServer

from bot.app import create_app
from bot.keys import ENGINE
from engine.adapters.store.migrate import upgrade_to_head
from engine.assembly import Engine, EngineOptions
from engine.config import parse_config
from engine.domain.model import Principal, Role, RunStatus
from tests.support.engines import wait_for, wait_status
from tests.support.ids import SequentialIds
from tests.support.waiting import quiet

HERE = Path(__file__).parent
CLI = HERE / "node_modules" / "@microsoft" / "m365agentsplayground" / "cli.js"
PRELOAD = HERE / "loopback.cjs"
CARD = "application/vnd.microsoft.card.adaptive"
SCHEMA = json.loads((HERE.parents[1] / "unit/cards/adaptive-card-1.5.json").read_text("utf-8"))
ALEX = "00000000-0000-0000-0000-0000000000020"  # the playground's current user, Alex Wilber

WORKFLOWS = """
refund:
  nodes:
    - {id: approve, type: approval, reason: "Refund {{ input.amount }} for {{ input.order }}",
       approvers: [finance], channels: [teams:playground], timeoutMinutes: 30}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}}
direct:
  nodes:
    - {id: approve, type: approval, reason: "Pay {{ input.amount }} to {{ input.payee }}",
       approvers: [finance], channels: ["teams:@alex"], timeoutMinutes: 30}
    - {id: pay, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.payee }}", amount: "{{ input.amount }}"}}
"""


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("SIGNOFF_REQUIRE_PLAYGROUND") == "1":
        pytest.fail(f"{reason} (and SIGNOFF_REQUIRE_PLAYGROUND=1)", pytrace=False)
    pytest.skip(reason)


def _node() -> str:
    node = shutil.which("node")
    if node is None or shutil.which("npx") is None:
        _unavailable("node/npx not found: install Node.js 20 to run the Teams playground test")
    if not CLI.exists():
        _unavailable(f"the Agents Playground is not installed: npm ci --prefix {HERE}")
    return node


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on ``port`` (Linux /proc/net)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


class Playground:
    """The playground process and its client side: HTTP calls and the conversation stream."""

    def __init__(self, port: int, session: aiohttp.ClientSession) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.session = session
        self.events: list[dict[str, Any]] = []
        self.changed = asyncio.Condition()
        self.config: dict[str, Any] = {}

    async def get(self, path: str) -> Any:
        async with self.session.get(self.base + path) as resp:
            assert resp.status == 200, await resp.text()
            return await resp.json()

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        async with self.session.post(self.base + path, json=body) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text) if text else None
            except json.JSONDecodeError:
                return resp.status, text

    async def listen(self) -> None:
        """Read the conversation stream (messages the bot creates and updates)."""
        async with self.session.ws_connect(
            self.base + "/_ws_conversation/v1/conversations/stream"
        ) as ws:
            async for message in ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    continue
                event = json.loads(message.data)
                async with self.changed:
                    self.events.append(event)
                    self.changed.notify_all()

    async def wait_for(self, predicate: Any, timeout: float = 20.0) -> Any:
        async with self.changed:
            try:
                await asyncio.wait_for(
                    self.changed.wait_for(lambda: predicate(self.events)), timeout
                )
            except TimeoutError:
                shown = json.dumps(self.events, indent=1)[-4000:]
                raise AssertionError(f"not seen on the conversation stream: {shown}") from None
            return predicate(self.events)


@asynccontextmanager
async def playground(node: str, bot_url: str, workdir: Path) -> AsyncIterator[Playground]:
    port = _free_port()
    env = {
        **os.environ,
        "APPLICATION_INSIGHTS_NO_STATSBEAT": "1",
        "TEAMSAPPTESTER_BROWSER": "none",
        # Child processes too (the parent is preloaded with -r; the script guards against twice).
        "NODE_OPTIONS": f"--require {PRELOAD}",
    }
    process = await asyncio.create_subprocess_exec(
        node,
        "-r",
        str(PRELOAD),
        str(CLI),
        "start",
        "-e",
        bot_url,
        "-c",
        "msteams",
        "-p",
        str(port),
        "--service-url",
        f"http://127.0.0.1:{port}/_connector",
        "--disable-telemetry",
        cwd=workdir,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output: list[str] = []

    async def drain() -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            output.append(line.decode(errors="replace").rstrip())

    drainer = asyncio.create_task(drain())
    async with aiohttp.ClientSession() as session:
        client = Playground(port, session)
        listener: asyncio.Task[None] | None = None
        try:
            for _ in range(300):
                if process.returncode is not None:
                    break
                try:
                    client.config = (await client.get("/_internal/v1/testConfig"))["config"]
                    break
                except (aiohttp.ClientError, AssertionError):
                    await quiet(0.1)  # a real process is starting
            if not client.config:
                pytest.fail("the playground did not start:\n" + "\n".join(output[-30:]))
            # Only loopback: the preload took effect.
            assert _listening_addresses(port) <= {"0100007F", "00000000000000000000000001000000"}
            listener = asyncio.create_task(client.listen())
            yield client
        finally:
            if listener is not None:
                listener.cancel()
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
            await drainer
            print("\n".join(output[-40:]))  # shown when the test fails


def _card_of(event: dict[str, Any]) -> dict[str, Any] | None:
    """The card a ``createMessage``/``updateMessage`` event carries."""
    message = event.get("message") or {}
    for attachment in message.get("attachments") or []:
        if attachment.get("contentType") == CARD:
            content = attachment.get("content")
            return json.loads(content) if isinstance(content, str) else content
    return None


def _texts(node: Any) -> str:
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("text"), str):
                out.append(value["text"])
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(node)
    return " ".join(" ".join(out).split())


@asynccontextmanager
async def signoff_and_playground(tmp_path: Path) -> AsyncIterator[tuple[Playground, Engine]]:
    """Signoff (empty Teams credentials, unsigned activities accepted) on a loopback port, and
    the playground pointed at it."""
    node = _node()
    db_url = f"sqlite+aiosqlite:///{tmp_path}/signoff.db"
    await upgrade_to_head(db_url)
    config = parse_config(
        f"database: {{url: '{db_url}'}}\n"
        "server: {host: 127.0.0.1, workers: 4, pollSeconds: 0.05, "
        "publicUrl: 'http://127.0.0.1:8080'}\n"
        "teams: {insecureLocalDev: true}\n"
        + textwrap.dedent(
            f"""
            people:
              alex: {{email: alexw@example.com, teams: {ALEX}}}
            groups:
              finance: [alex]
            admins: [alex]
            """
        )
        + "workflows:\n"
        + textwrap.indent(textwrap.dedent(WORKFLOWS), "  "),
        {},
    )
    app = create_app(config, EngineOptions(ids=SequentialIds("pg"), owner="playground"))
    server = TestServer(app, host="127.0.0.1", port=_free_port())
    await server.start_server()
    bot_url = f"http://127.0.0.1:{server.port}/api/messages"
    try:
        async with playground(node, bot_url, tmp_path) as pg:
            yield pg, app[ENGINE]
    finally:
        await server.close()


async def test_approve_through_the_agents_playground_api(tmp_path):
    """Approve as the playground's web client does: its invoke endpoint."""
    async with signoff_and_playground(tmp_path) as (pg, engine):
        await run_the_scenario(pg, engine, click=click_by_api)


async def click_by_api(pg: Playground, card: dict[str, Any], message_id: str) -> None:
    conversation, user = pg.config["personalChat"]["id"], pg.config["currentUser"]
    approve = next(a for a in card["actions"] if a.get("verb") == "grant")
    status, body = await pg.post(
        "/_conversation/v1/invoke",
        {
            "name": "adaptiveCard/action",
            "value": {
                "action": {"type": "Action.Execute", "verb": "grant", "data": approve["data"]},
                "trigger": "manual",
            },
            "from": {"id": user["id"]},
            "conversation": {"id": conversation},
            "replyToId": message_id,
        },
    )
    assert status == 200, body
    # The playground hands back the bot's invoke response body (without its statusCode): the
    # clicker's card, replaced.
    assert body["type"] == CARD and body.get("statusCode", 200) == 200
    assert "Approved by alex" in _texts(body["value"])


Click = Callable[[Playground, dict[str, Any], str], Awaitable[None]]


async def run_the_scenario(pg: Playground, engine: Engine, *, click: Click) -> None:
    conversation = pg.config["personalChat"]["id"]
    user = pg.config["currentUser"]
    assert user["aadObjectId"] == ALEX

    # The bot is installed: it stores the conversation reference.
    status, _ = await pg.post(f"/_debug/conversation/{conversation}/installation", {})
    assert status in (200, 201, 204)

    async def known() -> Any:
        return await engine.store.conversation("teams", conversation_id=conversation)

    await wait_for(known)

    # The admin names the conversation; the bot confirms in it.
    status, body = await pg.post(
        f"/_conversation/v1/conversations/{conversation}/messages",
        {"from": {"id": user["id"]}, "text": "subscribe playground", "textFormat": "plain"},
    )
    assert status in (200, 201), body
    await pg.wait_for(lambda events: any("teams:playground" in _texts(_card_of(e)) for e in events))

    # A run parks at the approval: its card arrives with the exact arguments.
    agent = Principal(name="token:agent", role=Role.AGENT, token="agent")
    run, _ = await engine.runs.start_run("refund", {"order": "A-17", "amount": 420}, agent)
    await wait_status(engine, run.id, RunStatus.WAITING)
    (request,) = await engine.store.list_takeovers(run_id=run.id)

    def approval_cards(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in events if "Refund 420 for A-17" in _texts(_card_of(e))]

    (created,) = await pg.wait_for(approval_cards)
    card = _card_of(created)
    assert card is not None
    assert [e.message for e in jsonschema.Draft6Validator(SCHEMA).iter_errors(card)] == []
    shown = _texts(card)
    assert '"amount": 420' in shown and '"order": "A-17"' in shown

    async def stored() -> Any:
        return await engine.store.chat_messages(request_id=request.id, kind="card")

    (posted,) = await wait_for(stored)
    message_id = posted.message_ref
    assert created["message"]["messageId"] == message_id

    # Alex clicks Approve.
    await click(pg, card, message_id)

    # The message is updated for everyone, the step runs once, its result is in the chat.
    await wait_status(engine, run.id, RunStatus.COMPLETED)
    ledger = await engine.store.ledger(run_id=run.id)
    assert [(r["action"], r["args"]) for r in ledger] == [
        ("refund", {"order": "A-17", "amount": 420})
    ]

    def updated(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            e
            for e in events
            if e.get("action") == "updateMessage"
            and e["message"].get("messageId") == message_id
            and "Approved by alex" in _texts(_card_of(e))
        ]

    (update,) = await pg.wait_for(updated)
    assert not [a for a in (_card_of(update) or {}).get("actions", [])]  # no buttons left
    await pg.wait_for(lambda events: any("completed in run" in _texts(_card_of(e)) for e in events))


# Debian's Chromium through Playwright, as the web tests use it (tests/e2e/web/conftest.py).
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


async def test_approve_by_clicking_in_the_playground_web_ui(tmp_path):
    """Approve with a real click on the card the playground's web client renders."""
    _node()
    try:
        from playwright.async_api import Route, async_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")

    async def loopback_only(route: Route) -> None:
        # The web client may name fonts or scripts elsewhere: nothing leaves the machine.
        host = urlsplit(route.request.url).hostname
        if host in ("127.0.0.1", "localhost"):
            await route.continue_()
        else:
            await route.abort()

    async with signoff_and_playground(tmp_path) as (pg, engine), async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=CHROMIUM, headless=True, chromium_sandbox=False, args=CHROMIUM_FLAGS
        )
        try:
            page = await browser.new_page()
            await page.route("**/*", loopback_only)
            await page.goto(pg.base)  # open before the bot posts: the stream has no history
            await page.wait_for_load_state("networkidle")

            async def click_in_the_page(
                pg: Playground, card: dict[str, Any], message_id: str
            ) -> None:
                await page.get_by_text("Refund 420 for A-17").first.wait_for(timeout=20_000)
                await page.get_by_role("button", name="Approve").first.click()
                await page.get_by_text("Approved by").first.wait_for(timeout=20_000)

            await run_the_scenario(pg, engine, click=click_in_the_page)
            await page.screenshot(path=str(tmp_path / "playground.png"))
        finally:
            await browser.close()
