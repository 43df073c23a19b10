"""The live pages' streams without a browser: the console's queue (``/console/queue/events``) and
the approval page (``/approvals/{id}/events``). Who may open them, what they send (SSE ``replace``
events carrying the pages' own fragments, then ``end``), that they follow changes made elsewhere
and that they close when the request ends or their time is up."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.domain.model import Role, RunStatus, TakeoverRequest
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_status
from tests.support.web import (
    DEMO_LEDGER,
    REFUND_DEMO,
    deny_over_api,
    link_path,
    pending_request,
    read_events,
    sign_in,
    web_of,
)

OTHER = """
other:
  nodes:
    - {id: gate, type: approval, reason: "Other thing", approvers: [carol], channels: [web]}
"""
REFUND = "Refund 91.37 EUR for A-1"
HELD = (
    DEMO_LEDGER
    + """
policies:
  - {decision: ask, connector: demo-ledger, action: refund, approvers: [finance]}
"""
)


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(
        migrated_db_url, REFUND_DEMO + OTHER, extra=HELD, clock=ManualClock()
    ) as api:
        yield api


async def _park(api: Api, workflow: str, order: str = "A-1") -> TakeoverRequest:
    run, _ = await api.engine.runs.start_run(workflow, {"order": order, "amount": "1"}, AGENT)
    return await pending_request(api.engine, run.id)


async def _replaced(stream: Any, element: str) -> str:
    """The next fragment the stream sends for ``element`` (other events are passed over)."""
    while True:
        for event, data in await read_events(stream, until="replace"):
            if event == "replace" and data.startswith(f'<div id="{element}"'):
                return data


async def _as(api: Api, name: str) -> None:
    """Sign in as ``name``'s token, in place of whoever was signed in."""
    api.client.session.cookie_jar.clear()
    await sign_in(api.client, api.tokens[name])


def _events(page_path: str) -> str:
    """The stream of the approval page at ``page_path``, with the same signed link."""
    path, _, query = page_path.partition("?")
    return f"{path}/events" + (f"?{query}" if query else "")


async def _closed(stream: Any) -> bool:
    return await asyncio.wait_for(stream.content.readline(), 10) == b""


# -- the console's queue ---------------------------------------------------------------------


async def test_the_queue_stream_needs_a_session(api: Api) -> None:
    resp = await api.client.get("/console/queue/events")
    assert resp.status == 401 and resp.content_type != "text/event-stream"
    await _as(api, "bob")
    bad = await api.client.get("/console/queue/events?cursor=nonsense")
    assert bad.status == 400 and "cursor" in await bad.text()


async def test_the_queue_stream_sends_the_persons_inbox_by_default(api: Api) -> None:
    await _park(api, "refund-demo")
    await _park(api, "other")
    await _as(api, "bob")  # finance, not carol's "other"

    stream = await api.client.get("/console/queue/events")
    assert stream.headers["Content-Type"] == "text/event-stream"
    assert stream.headers["Cache-Control"] == "no-store"
    mine = await _replaced(stream, "queue")
    assert REFUND in mine and "Other thing" not in mine
    stream.close()

    everything = await api.client.get("/console/queue/events?show=all")
    shown = await _replaced(everything, "queue")
    assert REFUND in shown and "Other thing" in shown
    everything.close()

    await _as(api, "dave")  # an approver of neither
    stream = await api.client.get("/console/queue/events")
    assert "Nothing is waiting for you" in await _replaced(stream, "queue")
    stream.close()


async def test_the_queue_page_offers_the_switch_and_its_stream(api: Api) -> None:
    await _park(api, "other")
    await _as(api, "admin")  # alice: an admin, not asked by "other"

    html = await (await api.client.get("/console?workflow=other")).text()
    assert "Nothing is waiting for you" in html  # an override is not her inbox
    assert 'data-events="/console/queue/events?workflow=other"' in html
    assert 'href="/console?workflow=other&amp;show=all"' in html
    assert '<script src="/static/live.js" defer></script>' in html
    everything = await (await api.client.get("/console?workflow=other&show=all")).text()
    assert "Other thing" in everything and 'aria-current="page">Everything waiting' in everything


async def test_requests_appear_and_leave_the_queue_stream(api: Api) -> None:
    await _as(api, "bob")
    stream = await api.client.get("/console/queue/events")
    assert "Nothing is waiting for you" in await _replaced(stream, "queue")

    request = await _park(api, "refund-demo")
    arrived = await _replaced(stream, "queue")
    assert REFUND in arrived and f'id="request-{request.id}"' in arrived

    await deny_over_api(api, request, "carol", "not now")
    assert "Nothing is waiting for you" in await _replaced(stream, "queue")
    stream.close()


async def test_a_held_call_appears_in_the_queue_stream(api: Api) -> None:
    await _as(api, "carol")
    stream = await api.client.get("/console/queue/events")
    assert "Nothing is waiting for you" in await _replaced(stream, "queue")

    call = {"connector": "demo-ledger", "action": "refund", "args": {"order": "o-7", "amount": 5}}
    status, body = await api.call("POST", "/v1/calls", as_="agent", json=call)
    assert status == 202 and body["status"] == "pending_approval", body

    arrived = await _replaced(stream, "queue")
    assert "Refund 5 EUR for order o-7" in arrived
    assert f'id="request-{body["requestId"]}"' in arrived
    stream.close()


async def test_a_stream_ends_after_its_time_and_is_checked_again(api: Api) -> None:
    web_of(api.client).stream_seconds = 0.5  # instead of 5 min
    await _as(api, "bob")
    stream = await api.client.get("/console/queue/events")
    await _replaced(stream, "queue")
    assert await _closed(stream)  # no end event: the browser reconnects

    clock = api.engine.clock
    assert isinstance(clock, ManualClock)
    await api.engine.tokens.revoke("bob", clock.now())
    clock.advance(seconds=2)  # past the serving process's token cache
    again = await api.client.get("/console/queue/events")
    assert again.status == 401  # an EventSource stops retrying on it


# -- the approval page ---------------------------------------------------------------------------


async def test_the_approval_stream_is_refused_like_the_page(api: Api) -> None:
    request = await _park(api, "refund-demo")
    path = f"/approvals/{request.id}/events"

    assert (await api.client.get(path)).status == 401  # nobody
    dave = _events(link_path(api.client, request, "dave"))
    assert (await api.client.get(dave)).status == 403  # a link of someone who may not see it
    bob = _events(link_path(api.client, request, "bob"))
    tampered = bob.replace("p=bob", "p=carol")
    assert (await api.client.get(tampered)).status == 403
    assert (await api.client.get("/approvals/nope/events")).status == 404
    await api.token("erin-token", Role.APPROVER, "dave")
    await _as(api, "erin-token")
    assert (await api.client.get(path)).status == 403  # a session that may not see it

    page = await (await api.client.get(link_path(api.client, request, "bob"))).text()
    assert f'data-events="{bob.replace("&", "&amp;")}&amp;seen=' in page  # the page's own link


async def test_the_approval_stream_follows_a_denial_elsewhere_and_ends(api: Api) -> None:
    request = await _park(api, "refund-demo")
    bob = link_path(api.client, request, "bob")
    stream = await api.client.get(_events(bob))
    assert stream.status == 200
    first = await _replaced(stream, "approval-state")
    assert "Approval needed" in first and 'value="grant"' in first and 'id="countdown"' in first

    await deny_over_api(api, request, "carol", "the order was <b>cancelled</b>")
    events = await read_events(stream, until="end")
    states = [d for e, d in events if e == "replace" and d.startswith('<div id="approval-state"')]
    assert len(states) == 1
    assert "Denied by carol just now: the order was &lt;b&gt;cancelled&lt;/b&gt;" in states[0]
    assert "<form" not in states[0] and 'id="countdown"' not in states[0]
    history = [d for e, d in events if e == "replace" and d.startswith('<section class="history"')]
    assert history and "Denied by carol" in history[-1]
    assert events[-1] == ("end", "denied")
    assert await _closed(stream)
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)  # its onDeny path

    clock = api.engine.clock
    assert isinstance(clock, ManualClock)
    clock.advance(minutes=2)
    page = await (await api.client.get(bob)).text()
    assert "Denied by carol 2 min ago: the order was" in page
    assert "data-events" not in page and "/static/live.js" not in page  # nothing to follow


async def test_the_pages_own_stream_sends_only_what_changed_since_the_page(api: Api) -> None:
    request = await _park(api, "refund-demo")
    page = await (await api.client.get(link_path(api.client, request, "bob"))).text()
    own = re.search(r'data-events="([^"]+)"', page)
    assert own is not None
    stream = await api.client.get(html.unescape(own[1]))
    assert stream.status == 200  # it has read the request the page shows, and sent nothing

    await deny_over_api(api, request, "carol", "cancelled")
    events = await read_events(stream, until="end")
    states = [d for e, d in events if e == "replace" and d.startswith('<div id="approval-state"')]
    assert len(states) == 1 and "Denied by carol" in states[0]  # not first the card it had
    assert events[-1] == ("end", "denied")


async def test_the_approval_stream_says_when_the_request_expired(api: Api) -> None:
    request = await _park(api, "refund-demo")
    await _as(api, "bob")
    stream = await api.client.get(f"/approvals/{request.id}/events")
    assert 'value="grant"' in await _replaced(stream, "approval-state")

    clock = api.engine.clock
    assert isinstance(clock, ManualClock)
    clock.set(request.expires_at)
    events = await read_events(stream, until="end")
    state = next(d for e, d in events if e == "replace" and 'id="approval-state"' in d)
    assert "This request expired before anyone decided it." in state and "<form" not in state
    assert events[-1] == ("end", "expired")
    assert await _closed(stream)
