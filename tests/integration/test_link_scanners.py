"""Link scanners never decide: Outlook Safe Links, the Slack and Teams link previews and mail
scanners open every URL of a message before (and after) its reader does (n8n #25311 and #27870
were approvals resumed by a preview). Opening a signed approval link, by GET or HEAD, any number
of times and as any user agent, shows the page and neither decides nor uses the link up; only
the page's own POST with its CSRF token decides, once. On SQLite and PostgreSQL, through a real
server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.domain.model import RunStatus, TakeoverRequest, TakeoverStatus
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_status
from tests.support.web import REFUND_DEMO, link_path, page, pending_request, submit

PREFETCHES = 20
SCANNERS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0",  # Safe Links detonates in a real browser
    "BingPreview/1.0b",
    "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
    "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5",  # Teams' previews
    "Mozilla/5.0 (compatible; Google-Safety; +https://www.google.com/bot.html)",
    "python-requests/2.32.3",
    "",
)


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, REFUND_DEMO, clock=ManualClock()) as api:
        yield api


async def _parked(api: Api) -> TakeoverRequest:
    run, _ = await api.engine.runs.start_run("refund-demo", {"order": "A-1042"}, AGENT)
    return await pending_request(api.engine, run.id)


async def _prefetch(api: Api, path: str) -> None:
    """What the scanners do to one link: PREFETCHES opens, GET and HEAD, each as its own
    cookie-less client, following redirects, plus a guess at an action in the query."""
    for i in range(PREFETCHES):
        agent = SCANNERS[i % len(SCANNERS)]
        api.client.session.cookie_jar.clear()
        method = api.client.head if i % 2 else api.client.get
        resp = await method(path, headers={"User-Agent": agent})
        assert resp.status in (200, 409, 410), (path, agent, resp.status)
        await resp.read()
    api.client.session.cookie_jar.clear()
    joiner = "&" if "?" in path else "?"
    guessed = await api.client.get(f"{path}{joiner}action=grant&reason=scanned")
    assert guessed.status == 200


async def _nothing_decided(api: Api, request: TakeoverRequest) -> None:
    after = await api.engine.store.get_takeover(request.id)
    assert after.status == TakeoverStatus.PENDING and after.votes == ()
    for person in ("alice", "bob", "carol"):
        assert await api.engine.store.link_use(request.id, person) is None


async def test_prefetched_links_decide_nothing_and_the_click_decides_once(api: Api) -> None:
    request = await _parked(api)
    links = {p: link_path(api.client, request, p) for p in ("alice", "bob", "carol")}
    plain = f"/approvals/{request.id}"

    for path in [*links.values(), plain]:
        await _prefetch(api, path)
    await _nothing_decided(api, request)

    # bob opens his link as a person does, after the scanners, and clicks Approve.
    status, html = await page(api.client, links["bob"])
    assert status == 200 and 'value="grant"' in html
    resp = await submit(api.client, links["bob"], {"action": "grant", "reason": "checked"})
    assert resp.status == 303
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)
    ledger = await api.engine.store.ledger(run_id=request.run_id)
    assert [e["action"] for e in ledger] == ["lookup", "refund"]  # the refund ran once

    # The scanners come back (a forwarded mail, a second preview): the page says what happened.
    for path in links.values():
        await _prefetch(api, path)
    after = await api.engine.store.get_takeover(request.id)
    assert after.status == TakeoverStatus.RELEASED and after.decided_by == "bob"
    use = await api.engine.store.link_use(request.id, "bob")
    assert use is not None and use.action == "grant"
    assert await api.engine.store.link_use(request.id, "alice") is None
    assert [e["action"] for e in await api.engine.store.ledger(run_id=request.run_id)] == [
        "lookup",
        "refund",
    ]


async def test_a_head_request_answers_like_the_page_without_a_body(api: Api) -> None:
    request = await _parked(api)
    link = link_path(api.client, request, "bob")

    head = await api.client.head(link)
    get = await api.client.get(link)

    assert head.status == get.status == 200
    assert head.headers["Content-Type"] == get.headers["Content-Type"]
    assert await head.read() == b""
    assert head.headers.get("Cache-Control") == get.headers.get("Cache-Control")
    await _nothing_decided(api, request)
