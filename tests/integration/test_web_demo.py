"""The first run: ``signoff demo`` beside a running server, the local admin's one-time link, and
``signoff serve`` on the real ``app.yaml`` taken from sign-in link to a completed demo run with
nothing set up by hand (what ``make run`` does, minus the venv)."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import aiohttp
import pytest

from bot.cli.login import local_admin_link
from bot.console.demo import run_demo, start_demo
from engine.domain.model import RunStatus
from tests.support.clock import ManualClock
from tests.support.engines import wait_status
from tests.support.process import ROOT, Server, cli, free_port
from tests.support.waiting import within
from tests.support.web import (
    REFUND_DEMO,
    csrf_of,
    link_path,
    local,
    page,
    pending_request,
    running_web,
    submit,
    web_config,
)

SECRET = "a-test-secret-key-of-some-length"


async def test_signoff_demo_prints_links_the_server_accepts(migrated_db_url: str) -> None:
    async with running_web(migrated_db_url, secret_key=SECRET, clock=ManualClock()) as api:
        out = io.StringIO()
        config = api.engine.config

        code = await run_demo(config, timeout=20, out=out)

        text = out.getvalue()
        assert code == 0, text
        assert "started run" in text and "approval page: http://127.0.0.1:" in text
        links = dict(re.findall(r"approval link for (\w+): (\S+)", text))
        assert sorted(links) == ["alice", "bob", "carol"]  # finance (demo-agent started it)
        run_id = re.search(r"run page: \S+/console/runs/(\S+)", text)
        assert run_id is not None
        status, html = await page(api.client, local(links["bob"]))
        assert status == 200 and 'value="grant"' in html
        assert (await submit(api.client, local(links["bob"]), {"action": "grant"})).status == 303
        await wait_status(api.engine, run_id.group(1), RunStatus.COMPLETED)


async def test_signoff_demo_without_a_secret_key_points_to_the_console(sqlite_url: str) -> None:
    from engine.adapters.store.migrate import upgrade_to_head

    await upgrade_to_head(sqlite_url)
    out = io.StringIO()
    config = web_config(sqlite_url, REFUND_DEMO, port=free_port())

    assert await run_demo(config, timeout=20, out=out) == 0
    assert "server.secretKey is empty" in out.getvalue()
    assert "approval link for" not in out.getvalue()


async def test_the_local_admin_link_is_made_on_sqlite_only(migrated_db_url: str) -> None:
    async with running_web(migrated_db_url, clock=ManualClock()) as api:
        link = await asyncio.to_thread(local_admin_link, api.engine.config)
        if not migrated_db_url.startswith("sqlite"):
            assert link is None
            return
        assert link is not None and "/console/login?once=so_" in link
        path = local(link)
        resp = await submit(api.client, "/console/login", {"once": path.split("once=")[1]},
                            csrf_from=path)  # fmt: skip
        assert resp.status == 303
        _, html = await page(api.client, "/console")
        assert "alice · admin" in html and "Start demo run" in html


@pytest.mark.slow
async def test_serve_then_the_login_link_the_demo_button_and_an_approval(tmp_path: Path) -> None:
    port = free_port()
    app_yaml = (ROOT / "app.yaml").read_text()
    database = f"sqlite+aiosqlite:///{tmp_path}/signoff.db"
    app_yaml = app_yaml.replace("sqlite+aiosqlite:///./signoff.db", database)
    app_yaml = app_yaml.replace("  port: 8080", f"  port: {port}")
    assert f"port: {port}" in app_yaml and str(tmp_path) in app_yaml
    config = tmp_path / "app.yaml"
    config.write_text(app_yaml)
    await cli(config, "migrate")
    server = Server(config, port, tmp_path / "serve.log")
    await server.start()
    try:
        found = re.search(r"this link works once\): (\S+)", (tmp_path / "serve.log").read_text())
        assert found, (tmp_path / "serve.log").read_text()
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            await _complete_the_demo(http, found.group(1))
    finally:
        assert await server.stop() == 0


async def _complete_the_demo(http: aiohttp.ClientSession, login_link: str) -> None:
    base = login_link.split("/console/")[0]

    async def form(url: str, fields: dict[str, str], csrf_page: str) -> aiohttp.ClientResponse:
        async with http.get(csrf_page) as got:
            token = csrf_of(await got.text())
        return await http.post(url, data={"csrf_token": token, **fields}, allow_redirects=False)

    signed_in = await form(f"{base}/console/login", {"once": login_link.split("once=")[1]},
                           login_link)  # fmt: skip
    assert signed_in.status == 303
    started = await form(f"{base}/console/demo", {}, f"{base}/console")
    assert started.status == 303
    run_page = base + started.headers["Location"]

    async def approval_link() -> re.Match[str] | None:
        async with http.get(run_page) as resp:
            return re.search(r'href="(/approvals/[^"]+)"', await resp.text())

    found = await within(approval_link, 10)
    approval = None if found is None else base + found.group(1)
    assert approval is not None, "the demo run did not reach its approval"
    decided = await form(approval, {"action": "grant", "reason": "looks right"}, approval)
    assert decided.status == 303

    async def completed() -> bool:
        async with http.get(run_page) as resp:
            return "status--completed" in await resp.text()

    if not await within(completed, 10):
        raise AssertionError("the demo run did not complete")


async def test_the_demo_refunds_what_its_lookup_found(migrated_db_url: str) -> None:
    """The shipped ``refund-demo`` asks to refund the amount and currency its own lookup found
    (not a fixed figure), and the approval page shows that lookup's output next to the refund's
    arguments, since the approval rests on it."""
    async with running_web(migrated_db_url, secret_key=SECRET, clock=ManualClock()) as api:
        run = await start_demo(api.engine)
        request = await pending_request(api.engine, run.id)
        journal = await api.engine.store.journal(run.id)
        found = next(
            e.data["output"] for e in journal if e.step_id == "lookup" and "output" in e.data
        )
        amount, currency = found["amount"], found["currency"]
        assert currency == "EUR" and isinstance(amount, float)
        assert request.reason == f"Refund {amount:.2f} EUR for {run.input['order']}"
        assert request.details["args"] == {
            "order": run.input["order"], "amount": amount, "currency": "EUR",
        }  # fmt: skip
        assert request.details["stepOutputs"] == [{"stepId": "lookup", "output": found}]

        status, html = await page(api.client, link_path(api.client, request, "bob"))
        assert status == 200
        assert "Output of step <code>lookup</code>" in html
        assert f"&#34;customer&#34;: &#34;{found['customer']}&#34;" in html

        assert (await submit(api.client, link_path(api.client, request, "bob"),
                             {"action": "grant"})).status == 303  # fmt: skip
        await wait_status(api.engine, run.id, RunStatus.COMPLETED)
        refund = (await api.engine.store.ledger(run_id=run.id))[-1]
        assert refund["action"] == "refund"
        assert refund["args"] == {"order": run.input["order"], "amount": amount, "currency": "EUR"}
