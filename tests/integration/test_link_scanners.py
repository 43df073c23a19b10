"""Link scanners never decide: Outlook Safe Links, the Slack and Teams link previews and mail
scanners open every URL of a message (n8n #25311 and #27870 were approvals resumed by a
preview). Twenty opens of every emailed link before the click are
``tests/integration/email/test_email_delivery.py``'s; here, a HEAD answers as the page does,
and a guessed action in the query decides nothing. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.domain.model import TakeoverRequest, TakeoverStatus
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT
from tests.support.web import REFUND_DEMO, link_path, pending_request


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, REFUND_DEMO, clock=ManualClock()) as api:
        yield api


async def _parked(api: Api) -> TakeoverRequest:
    run, _ = await api.engine.runs.start_run("refund-demo", {"order": "A-1042"}, AGENT)
    return await pending_request(api.engine, run.id)


async def _nothing_decided(api: Api, request: TakeoverRequest) -> None:
    after = await api.engine.store.get_takeover(request.id)
    assert after.status == TakeoverStatus.PENDING and after.votes == ()
    assert await api.engine.store.link_use(request.id, "bob") is None


async def test_an_action_in_the_query_decides_nothing(api: Api) -> None:
    request = await _parked(api)

    for path in (link_path(api.client, request, "bob"), f"/approvals/{request.id}?x=1"):
        for guessed in ("grant", "deny", "takeover"):
            api.client.session.cookie_jar.clear()
            resp = await api.client.get(f"{path}&action={guessed}&reason=scanned")
            assert resp.status == 200

    await _nothing_decided(api, request)


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
