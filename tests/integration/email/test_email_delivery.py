"""The email channel against a real SMTP server: what each recipient gets (parts, headers, their
own link, their time zone), one thread per request, and links that only a POST decides."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.domain.model import RunStatus, TakeoverStatus
from tests.integration.email.harness import (
    SENDER,
    email_api,
    links_in,
    outbox_statuses,
    received,
    requests_of,
)
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_for, wait_status
from tests.support.smtp import SmtpServer
from tests.support.web import csrf_of, local, page, pending_request, submit

INPUT = {"order": "A-1", "amount": "12.50"}


@pytest.fixture
async def api(migrated_db_url: str, smtp: SmtpServer, clock: ManualClock) -> AsyncIterator[Api]:
    async with email_api(migrated_db_url, smtp, clock=clock) as api:
        yield api


async def test_each_approver_gets_the_card_with_their_own_link_and_time_zone(
    api: Api, smtp: SmtpServer
) -> None:
    run, _ = await api.engine.runs.start_run("refund", INPUT, AGENT)
    request = await pending_request(api.engine, run.id)
    assert request.channels == ("email:@alice", "email:@bob", "email:@carol")
    mails = {m.rcpt_tos[0]: m for m in await received(smtp, 3)}
    assert sorted(mails) == ["alice@example.com", "bob@example.com", "carol@example.com"]

    alice = mails["alice@example.com"]
    msg = alice.message
    assert alice.mail_from == SENDER
    assert msg["From"] == f"Signoff <{SENDER}>" and msg["To"] == "alice@example.com"
    assert msg["Subject"] == "Approval needed: demo-ledger · refund — Refund 12.50 for A-1"
    assert msg["Date"] and msg["Auto-Submitted"] == "auto-generated"
    assert msg["In-Reply-To"] is None and msg["References"] is None
    assert msg["Message-ID"].endswith("@signoff.test>")
    assert msg.get_content_type() == "multipart/alternative"
    assert [p.get_content_type() for p in msg.iter_parts()] == ["text/plain", "text/html"]

    text, html = alice.part("plain"), alice.part("html")
    for part in (text, html):
        assert "Refund 12.50 for A-1" in part
        assert "Open to approve or deny" in part
    # The exact arguments, in both parts.
    assert '"amount": "12.50"' in text and '"order": "A-1"' in text
    assert "&#34;amount&#34;: &#34;12.50&#34;" in html or "&quot;amount&quot;" in html
    # No scripts, no images, no forms, no remote anything but the one link.
    lowered = html.lower()
    for banned in ("<script", "<img", "<form", "<link", "<style", "src=", "javascript:"):
        assert banned not in lowered
    # The expiry in the reader's own time zone, named; UTC for whoever has none.
    assert "CET (Europe/Berlin)" in text and "Thu 1 Jan 2026, 14:00 CET" in text
    assert "Thu 1 Jan 2026, 13:00 UTC" in mails["bob@example.com"].part("plain")
    assert "08:00 EST (America/New_York)" in mails["carol@example.com"].part("plain")

    # Each mail carries its reader's link, and nobody else's.
    for address, person in (("alice@example.com", "alice"), ("bob@example.com", "bob")):
        links = set(links_in(mails[address]))
        assert len(links) == 1
        (link,) = links
        assert f"p={person}&" in link and "sig=" in link
        assert link.replace("&", "&amp;") in mails[address].part("html")
    assert len(set(smtp.message_ids())) == 3


async def test_notices_are_replies_in_the_cards_thread(
    api: Api, smtp: SmtpServer, clock: ManualClock
) -> None:
    run, _ = await api.engine.runs.start_run("refund", INPUT, AGENT)
    await pending_request(api.engine, run.id)
    card = next(m for m in await received(smtp, 3) if m.rcpt_tos == ("bob@example.com",))
    root = card.message_id

    clock.advance(minutes=46)  # 15 minutes before the deadline: the reminder
    await wait_for(lambda: len(smtp.to("bob@example.com")) >= 2)
    reminder = smtp.to("bob@example.com")[1]
    assert reminder.message["In-Reply-To"] == root and reminder.message["References"] == root
    assert reminder.message["Subject"] == f"Re: {card.message['Subject']}"
    assert "Reminder:" in reminder.part("plain")
    assert links_in(reminder) == links_in(card)  # bob's own link again

    (link,) = set(links_in(card))
    resp = await submit(api.client, local(link), {"action": "grant"})
    assert resp.status == 303
    await wait_status(api.engine, run.id, RunStatus.COMPLETED)
    await wait_for(lambda: len(smtp.to("bob@example.com")) >= 4)
    await wait_for(lambda: _all_sent(api, run.id))
    bobs = smtp.to("bob@example.com")
    # card, reminder, the decision, the step's result: no second card for the card update.
    kinds = [m.part("plain").partition("\n")[0] for m in bobs]
    assert len(bobs) == 4, kinds
    decision = next(m for m in bobs if m.part("plain").startswith("bob approved"))
    assert decision.message["In-Reply-To"] == root and decision.message["References"] == root
    assert decision.message["Subject"].startswith(
        "Re: Approval needed: demo-ledger · refund — Refund"
    )
    assert "http://signoff.test/approvals/" in decision.part("plain")
    assert "sig=" not in decision.part("plain")  # decided: the page, no longer a signed link
    result = next(m for m in bobs if m.part("plain").startswith("Step pay completed"))
    assert result.message["In-Reply-To"] == root
    assert len(set(smtp.message_ids())) == len(smtp.messages)


async def test_prefetches_of_every_link_decide_nothing_and_a_post_decides_once(
    api: Api, smtp: SmtpServer
) -> None:
    run, _ = await api.engine.runs.start_run("refund", INPUT, AGENT)
    request = await pending_request(api.engine, run.id)
    links = [link for m in await received(smtp, 3) for link in links_in(m)]
    assert len(links) == 3
    agents = (
        "Mozilla/5.0 (compatible; Microsoft Office Safe Links)",
        "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
        "Mozilla/5.0 (Windows NT 10.0) SkypeUriPreview Preview/0.5",
        "Barracuda Sentinel (EE)",
    )
    for link in links:
        for i in range(20):
            method = api.client.head if i % 2 else api.client.get
            resp = await method(local(link), headers={"User-Agent": agents[i % len(agents)]})
            assert resp.status in (200, 405), resp.status
            resp.release()
    (still,) = await requests_of(api, run.id)
    assert still.status is TakeoverStatus.PENDING and not still.votes
    assert (await api.engine.store.get_run(run.id)).status is RunStatus.WAITING

    carol = local(next(link for link in links if "p=carol&" in link))
    _, html = await page(api.client, carol)
    form = {"csrf_token": csrf_of(html), "request_id": request.id}
    resp = await api.client.post(carol, data={**form, "action": "grant"}, allow_redirects=False)
    assert resp.status == 303
    await wait_status(api.engine, run.id, RunStatus.COMPLETED)
    again = await api.client.post(carol, data={**form, "action": "deny"}, allow_redirects=False)
    assert again.status == 409  # the link was used: it decides once
    (decided,) = await requests_of(api, run.id)
    assert decided.status is TakeoverStatus.RELEASED and decided.decided_by == "carol"
    assert request.id == decided.id


async def _all_sent(api: Api, run_id: str) -> bool:
    statuses = await outbox_statuses(api, run_id)
    return bool(statuses) and all(s == "sent" for s in statuses)
