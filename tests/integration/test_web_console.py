"""The operator console: sign-in with an API token (and the local admin's one-time link), the
queue and its filters, runs, the run page's live timeline over SSE, the demo button; and the
split of errors between the JSON API and the HTML pages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from http.cookies import SimpleCookie

import pytest
from aiohttp import ClientSession, CookieJar

from bot.console.login import LOCAL_ADMIN
from bot.tokens import hash_token, new_token
from engine.domain.model import Role, RunStatus
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_status
from tests.support.web import (
    REFUND_DEMO,
    link_path,
    page,
    pending_request,
    read_events,
    sign_in,
    submit,
)

OTHER = """
other:
  nodes:
    - {id: gate, type: approval, reason: "Other thing", approvers: [carol],
       channels: [web, "webhook:ops"]}
"""
WEBHOOKS = "webhooks:\n  ops: {url: 'http://127.0.0.1:9/hook'}\n"


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(
        migrated_db_url, REFUND_DEMO + OTHER, extra=WEBHOOKS, clock=ManualClock()
    ) as api:
        yield api


async def test_console_pages_send_strangers_to_sign_in(api: Api) -> None:
    for path in ("/console", "/console/runs", "/console/runs/nope"):
        resp = await api.client.get(path, allow_redirects=False)
        assert resp.status == 303
        assert resp.headers["Location"].startswith("/console/login?next=")
    events = await api.client.get("/console/runs/nope/events")
    assert events.status == 401


async def test_signing_in_with_a_token_sets_a_strict_http_only_session(api: Api) -> None:
    resp = await sign_in(api.client, api.tokens["bob"])

    cookie = SimpleCookie(resp.headers["Set-Cookie"])["signoff_session"]
    assert cookie["httponly"] and cookie["samesite"] == "Strict" and not cookie["secure"]
    assert resp.headers["Location"] == "/console"
    status, html = await page(api.client, "/console")
    assert status == 200
    assert "bob · approver" in html


async def test_bad_tokens_and_agent_tokens_cannot_sign_in(api: Api) -> None:
    bad = await submit(api.client, "/console/login", {"token": "so_nope"})
    assert bad.status == 401
    assert "not valid" in await bad.text()
    agent = await submit(api.client, "/console/login", {"token": api.tokens["agent"]})
    assert agent.status == 403
    assert "Agent tokens cannot sign in" in await agent.text()
    assert (await api.client.get("/console", allow_redirects=False)).status == 303


async def test_revoking_the_token_ends_its_sessions(api: Api) -> None:
    await sign_in(api.client, api.tokens["carol"])
    assert (await api.client.get("/console", allow_redirects=False)).status == 200

    await api.engine.store.revoke_token("carol", api.engine.clock.now())

    assert (await api.client.get("/console", allow_redirects=False)).status == 303


async def test_the_next_page_must_be_on_this_server(api: Api) -> None:
    for target in ("https://evil.example/", "//evil.example/", "/\\evil.example"):
        api.client.session.cookie_jar.clear()
        resp = await submit(
            api.client, "/console/login", {"token": api.tokens["bob"], "next": target}
        )
        assert resp.headers["Location"] == "/console"


async def test_the_local_admin_link_signs_in_once(api: Api) -> None:
    once = new_token()
    await api.engine.store.put_token(
        LOCAL_ADMIN, Role.ADMIN, "alice", hash_token(once), api.engine.clock.now()
    )
    path = f"/console/login?once={once}"

    status, html = await page(api.client, path)
    assert status == 200 and "Sign in as the local admin" in html
    status, _ = await page(api.client, path)  # a link preview spends nothing
    resp = await submit(api.client, "/console/login", {"once": once}, csrf_from=path)
    assert resp.status == 303
    _, html = await page(api.client, "/console")
    assert "alice · admin" in html

    base = str(api.client.make_url("/"))
    async with ClientSession(base_url=base, cookie_jar=CookieJar(unsafe=True)) as other:
        # the used link's page has no form any more: a form kept open in another tab
        again = await submit(other, "/console/login", {"once": once})  # type: ignore[arg-type]
        assert again.status == 410
        assert "already used" in await again.text()
        status, html = await page(other, path)  # type: ignore[arg-type]
        assert status == 410 and "already used" in html and "Sign in as" not in html
        assert "signoff login-link --person alice" in html
        bearer = await other.get("/v1/runs", headers={"Authorization": f"Bearer {once}"})
        assert bearer.status == 401  # the token's value was replaced
    assert (await api.client.get("/console", allow_redirects=False)).status == 200


async def test_a_replaced_link_says_so_and_offers_no_sign_in(api: Api) -> None:
    """A newer link (signoff login-link, a restart of serve) replaces the value: the old link
    was not used, and its page says what happened, without the button."""
    tokens, now = api.engine.tokens, api.engine.clock.now()
    first, second = new_token(), new_token()
    await tokens.put(LOCAL_ADMIN, Role.ADMIN, "alice", hash_token(first), now)
    await tokens.put(LOCAL_ADMIN, Role.ADMIN, "alice", hash_token(second), now)

    for path in (f"/console/login?once={first}", "/console/login?once=so_madeup"):
        status, html = await page(api.client, path)
        assert status == 410, path
        assert "replaced by a newer link" in html and "already used" not in html
        assert "Sign in as" not in html and 'name="once"' not in html
        assert "signoff login-link --person NAME" in html
    resp = await submit(
        api.client, "/console/login", {"once": first}, csrf_from=f"/console/login?once={second}"
    )
    assert resp.status == 410 and "replaced by a newer link" in await resp.text()
    status, html = await page(api.client, f"/console/login?once={second}")
    assert status == 200 and "as alice, an admin" in html  # the newest still works

    await tokens.revoke(LOCAL_ADMIN, now)
    status, html = await page(api.client, f"/console/login?once={second}")
    assert status == 410 and "no sign-in link is active now" in html


async def test_the_queue_lists_pending_approvals_oldest_first_with_filters(
    api: Api,
) -> None:
    clock = api.engine.clock
    assert isinstance(clock, ManualClock)
    first, _ = await api.engine.runs.start_run(
        "refund-demo", {"order": "A-1", "amount": "1"}, AGENT
    )
    await pending_request(api.engine, first.id)
    clock.advance(minutes=2)
    second, _ = await api.engine.runs.start_run("other", {}, AGENT)
    await pending_request(api.engine, second.id)
    await sign_in(api.client, api.tokens["admin"])

    _, html = await page(api.client, "/console?show=all")
    assert html.index("Refund 91.37 EUR for A-1") < html.index("Other thing")
    assert "2 min" in html

    _, only_other = await page(api.client, "/console?show=all&workflow=other")
    assert "Other thing" in only_other and "Refund 91.37 EUR for A-1" not in only_other
    _, by_channel = await page(api.client, "/console?show=all&channel=webhook%3Aops")
    assert "Other thing" in by_channel and "Refund 91.37 EUR for A-1" not in by_channel
    _, for_bob = await page(api.client, "/console?show=all&approver=bob")
    assert "Refund 91.37 EUR for A-1" in for_bob and "Other thing" not in for_bob


async def test_runs_page_lists_runs_with_their_status(api: Api) -> None:
    run, _ = await api.engine.runs.start_run("refund-demo", {"order": "A-7", "amount": "3"}, AGENT)
    await pending_request(api.engine, run.id)
    await sign_in(api.client, api.tokens["bob"])

    _, html = await page(api.client, "/console/runs")
    assert f"/console/runs/{run.id}" in html and "status--waiting" in html
    _, done = await page(api.client, "/console/runs?status=completed")
    assert f"/console/runs/{run.id}" not in done
    status, _ = await page(api.client, "/console/runs?status=bogus")
    assert status == 400


async def test_the_run_page_streams_its_timeline_until_the_run_completes(api: Api) -> None:
    await sign_in(api.client, api.tokens["admin"])
    resp = await submit(api.client, "/console/demo", {}, csrf_from="/console")
    assert resp.status == 303
    run_path = resp.headers["Location"]
    run_id = run_path.rsplit("/", 1)[1]
    run = await api.engine.store.get_run(run_id)
    assert run.workflow == "refund-demo" and run.requested_by == "demo-agent"
    request = await pending_request(api.engine, run_id)

    status, html = await page(api.client, run_path)
    assert status == 200
    assert 'data-events="/console/runs/' in html and "/static/live.js" in html
    assert f'href="/approvals/{request.id}"' in html

    stream = await api.client.get(f"{run_path}/events?after=0")
    assert stream.headers["Content-Type"] == "text/event-stream"
    seen = await read_events(stream, until="status")
    assert ("status", "waiting") in seen
    labels = " ".join(data for event, data in seen if event == "item")
    assert "Step lookup completed" in labels and "Approval requested" in labels

    decide = await submit(api.client, link_path(api.client, request, "bob"), {"action": "grant"})
    assert decide.status == 303
    rest = await read_events(stream, until="end")
    assert ("end", "completed") in rest
    labels = " ".join(data for event, data in rest if event == "item")
    assert "Granted by bob" in labels and "Run completed" in labels
    assert "Step refund completed" in labels
    await wait_status(api.engine, run_id, RunStatus.COMPLETED)

    _, final = await page(api.client, run_path)
    assert "data-events" not in final and "status--completed" in final


async def test_a_resumed_stream_starts_after_the_last_event_it_saw(api: Api) -> None:
    await sign_in(api.client, api.tokens["admin"])
    run, _ = await api.engine.runs.start_run("refund-demo", {"order": "A-9", "amount": "9"}, AGENT)
    await pending_request(api.engine, run.id)
    journal = await api.engine.store.journal(run.id)

    stream = await api.client.get(
        f"/console/runs/{run.id}/events", headers={"Last-Event-ID": str(journal[-2].seq)}
    )
    seen = await read_events(stream, until="status")

    items = [data for event, data in seen if event == "item"]
    assert len(items) == 1 and f'id="seq-{journal[-1].seq}"' in items[0]
    stream.close()


async def test_api_errors_stay_json_and_page_errors_are_html(api: Api) -> None:
    status, body = await api.call("GET", "/v1/runs/nope", as_="bob")
    assert status == 404 and body["error"] == "not_found"
    missing = await api.client.get("/approvals/nope")
    assert missing.status == 404 and missing.content_type == "text/html"
    assert "takeover request nope not found" in await missing.text()
    assert missing.headers["Referrer-Policy"] == "no-referrer"
    assert "default-src 'none'" in missing.headers["Content-Security-Policy"]


async def test_static_files_are_served(api: Api) -> None:
    css = await api.client.get("/static/signoff.css")
    assert css.status == 200 and "timeline" in await css.text()
    js = await api.client.get("/static/live.js")
    assert js.status == 200 and "EventSource" in await js.text()
