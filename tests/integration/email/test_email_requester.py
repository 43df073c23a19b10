"""The person who asked is told by email how their request ended, when its cards went by email:
dave's agent asks, the approvers get the cards, and dave gets one email of his own (not a reply
in a thread he never had) saying who approved it, or that it expired."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.domain.model import Role, RunStatus
from tests.integration.email.harness import email_api, links_in, received
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import wait_for, wait_status
from tests.support.smtp import Received, SmtpServer
from tests.support.web import local, pending_request, submit


@pytest.fixture
async def api(migrated_db_url: str, smtp: SmtpServer, clock: ManualClock) -> AsyncIterator[Api]:
    async with email_api(migrated_db_url, smtp, clock=clock) as api:
        await api.token("dave-agent", Role.AGENT, "dave")
        yield api


async def _asked_by_dave(api: Api, order: str) -> str:
    status, run = await api.call(
        "POST",
        "/v1/runs",
        as_="dave-agent",
        json={"workflow": "refund", "input": {"order": order, "amount": "12.50"}},
    )
    assert status == 201, run
    return str(run["id"])


async def _to_dave(smtp: SmtpServer) -> Received:
    async def found() -> Received | None:
        mine = [m for m in smtp.messages if m.rcpt_tos == ("dave@example.com",)]
        return mine[0] if mine else None

    received_by_dave: Received = await wait_for(found)
    return received_by_dave


async def test_the_requester_is_told_who_approved_in_a_message_of_their_own(
    api: Api, smtp: SmtpServer
) -> None:
    run_id = await _asked_by_dave(api, "A-1")
    request = await pending_request(api.engine, run_id)
    assert request.details["requester"] == {"person": "dave", "channels": ["email:@dave"]}
    cards = {m.rcpt_tos[0]: m for m in await received(smtp, 3)}
    assert "dave@example.com" not in cards  # dave asks; he does not decide

    (link,) = set(links_in(cards["bob@example.com"]))
    assert (await submit(api.client, local(link), {"action": "grant"})).status == 303
    await wait_status(api.engine, run_id, RunStatus.COMPLETED)

    told = await _to_dave(smtp)
    msg = told.message
    assert msg["Subject"].startswith("bob approved your request")
    assert msg["In-Reply-To"] is None and msg["References"] is None  # no thread he never had
    assert "bob approved your request" in told.part("plain")
    assert "bob approved your request" in told.part("html")
    # The page, to see what happened (it asks him to sign in): no link of his to decide with.
    assert links_in(told) == [f"http://signoff.test/approvals/{request.id}"]


async def test_the_requester_is_told_when_it_expired(
    api: Api, smtp: SmtpServer, clock: ManualClock
) -> None:
    run_id = await _asked_by_dave(api, "A-2")
    request = await pending_request(api.engine, run_id)
    await received(smtp, 3)

    clock.set(request.expires_at)
    api.engine.wake()

    told = await _to_dave(smtp)
    assert told.part("plain").startswith("Your request")
    assert "expired" in told.part("plain") and "with no decision" in told.part("plain")
