"""Reply to decide (``smtp.inbound``), end to end over real SMTP: Signoff emails each approver
through a test SMTP server with their own signed ``Reply-To``; aiosmtplib sends their replies
to the SMTP server Signoff runs; Signoff's answers come back through the test server, in the
reply's thread. A reply "approve" decides once; a second reply is answered that the request was
already decided; forwarded, automatic, unknown and oversized mail decides nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from email.message import EmailMessage
from itertools import count
from typing import Any

import aiosmtplib
import pytest

from bot.email.inbound import MAX_MESSAGE_BYTES
from engine.domain.model import RunStatus, TakeoverRequest, TakeoverStatus
from tests.integration.email.harness import email_api, received
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_for, wait_status
from tests.support.process import free_port
from tests.support.smtp import Received, SmtpServer
from tests.support.web import pending_request

INPUT = {"order": "A-1", "amount": "12.50"}
DOMAIN = "replies.signoff.test"
SUBJECT = "Approval needed: demo-ledger · refund — Refund 12.50 for A-1"
_IDS = count()


class Replies:
    """The approvers' mail clients: what each received, and replying to it."""

    def __init__(self, api: Api, smtp: SmtpServer, port: int) -> None:
        self.api, self.smtp, self.port = api, smtp, port

    async def park(self) -> tuple[TakeoverRequest, dict[str, Received]]:
        run, _ = await self.api.engine.runs.start_run("refund", INPUT, AGENT)
        request = await pending_request(self.api.engine, run.id)
        cards = {m.rcpt_tos[0].split("@")[0]: m for m in await received(self.smtp, 3)}
        return request, cards

    async def reply(
        self,
        to: str,
        text: str,
        *,
        sender: str = "bob@example.com",
        envelope_from: str | None = None,
        headers: dict[str, str] | None = None,
        html: bool = False,
    ) -> Any:
        message = EmailMessage()
        message["From"] = sender
        message["To"] = to
        message["Subject"] = f"Re: {SUBJECT}"
        message["Message-ID"] = f"<reply-{next(_IDS)}@mail.example.com>"
        for name, value in (headers or {}).items():
            message[name] = value
        message.set_content(text, subtype="html" if html else "plain")
        return await aiosmtplib.send(
            message,
            hostname="127.0.0.1",
            port=self.port,
            sender=sender if envelope_from is None else envelope_from,
            recipients=[to],
            start_tls=False,
            timeout=30,
        )

    async def answers(self, expected: int) -> list[Received]:
        """Signoff's answers (``Auto-Submitted: auto-replied``), once ``expected`` have come."""

        def answers() -> list[Received]:
            return [m for m in self.smtp.messages if m.message["Auto-Submitted"] == "auto-replied"]

        await wait_for(lambda: len(answers()) >= expected)
        return answers()

    async def queued_answers(self) -> int:
        rows = await self.api.engine.store.outbox_messages()
        return sum(1 for record, _, _ in rows if record.kind == "answer")


@pytest.fixture
async def replies(migrated_db_url: str, smtp: SmtpServer) -> AsyncIterator[Replies]:
    port = free_port()
    inbound = f"inbound: {{port: {port}, domain: {DOMAIN}}}"
    async with email_api(migrated_db_url, smtp, clock=ManualClock(), more=inbound) as api:
        yield Replies(api, smtp, port)


async def _status(api: Api, request: TakeoverRequest) -> TakeoverStatus:
    return (await api.engine.store.get_takeover(request.id)).status


async def test_a_reply_approve_decides_once_and_a_second_is_answered(replies: Replies) -> None:
    api = replies.api
    request, cards = await replies.park()
    bob = cards["bob"].message
    reply_to = bob["Reply-To"].addresses[0].addr_spec
    assert reply_to.startswith("signoff+") and reply_to.endswith(f"@{DOMAIN}")
    assert reply_to != cards["carol"].message["Reply-To"].addresses[0].addr_spec
    assert "Reply with approve or deny as the first word" in cards["bob"].part("plain")
    assert "Reply with approve or deny as the first word" in cards["bob"].part("html")

    await replies.reply(reply_to, "Approve: checked with the customer\n\nOn Sat, x wrote:\n> deny")

    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)
    after = await api.engine.store.get_takeover(request.id)
    assert after.status == TakeoverStatus.RELEASED and after.decided_by == "bob"
    assert after.notes == "checked with the customer"
    [answer] = await replies.answers(1)
    msg = answer.message
    assert answer.rcpt_tos == ("bob@example.com",) and msg["Subject"] == f"Re: {SUBJECT}"
    assert msg["In-Reply-To"] == msg["References"] and msg["In-Reply-To"].startswith("<reply-")
    assert msg.get_content_type() == "text/plain"
    assert answer.part("plain").startswith("You approved “Refund 12.50 for A-1”, with your reason")

    await replies.reply(reply_to, "approve")  # bob again
    carols = cards["carol"].message["Reply-To"].addresses[0].addr_spec
    await replies.reply(carols, "deny", sender="carol@example.com")

    texts = {m.rcpt_tos[0]: m.part("plain").strip() for m in await replies.answers(3)}
    assert texts["bob@example.com"] == (
        "You already decided this request, so this reply decided nothing."
    )
    assert texts["carol@example.com"] == (
        "This request was approved by bob before your reply, so it decided nothing."
    )
    ledger = await api.engine.store.ledger(run_id=request.run_id)
    assert [e["action"] for e in ledger] == ["refund"]  # the refund ran once


async def test_deny_with_a_reason_from_an_html_reply(replies: Replies) -> None:
    request, cards = await replies.park()
    to = cards["carol"].message["Reply-To"].addresses[0].addr_spec
    html = (
        "<div>Deny &ndash; duplicate of A-0<br></div>"
        "<blockquote>Approve or deny: Refund 12.50 for A-1</blockquote>"
    )

    await replies.reply(to, html, sender="carol@example.com", html=True)

    after = await replies.api.engine.store.get_takeover(request.id)
    assert after.status == TakeoverStatus.DENIED and after.decided_by == "carol"
    assert after.notes == "duplicate of A-0"


async def test_replies_that_decide_nothing_are_answered_why(replies: Replies) -> None:
    request, cards = await replies.park()
    to = cards["bob"].message["Reply-To"].addresses[0].addr_spec

    await replies.reply(to, "yes please go ahead")
    await replies.reply(to, "approve", sender="carol@example.com")  # bob's email, forwarded
    await replies.reply(to, "approve", sender="mallory@example.net")  # nobody's mailbox

    assert await _status(replies.api, request) == TakeoverStatus.PENDING
    texts = {m.rcpt_tos[0]: m.part("plain") for m in await replies.answers(2)}
    assert "began with “yes”, which is not approve or deny" in texts["bob@example.com"]
    assert (
        "accepted only from the mailbox the approval email was sent to"
        in (texts["carol@example.com"])
    )
    assert "mallory@example.net" not in texts  # Signoff writes to no stranger
    assert await replies.queued_answers() == 2
    assert await replies.api.engine.store.link_use(request.id, "bob") is None


@pytest.mark.parametrize(
    ("headers", "envelope_from"),
    [
        ({"Auto-Submitted": "auto-replied"}, None),  # an out-of-office reply
        ({"Precedence": "bulk"}, None),
        ({"List-Id": "<finance.lists.example.com>"}, None),
        ({}, ""),  # a bounce: MAIL FROM:<>
    ],
)
async def test_automatic_mail_is_neither_acted_on_nor_answered(
    replies: Replies, headers: dict[str, str], envelope_from: str | None
) -> None:
    request, cards = await replies.park()
    to = cards["bob"].message["Reply-To"].addresses[0].addr_spec

    await replies.reply(to, "approve", headers=headers, envelope_from=envelope_from)

    assert await _status(replies.api, request) == TakeoverStatus.PENDING
    assert await replies.queued_answers() == 0  # the server answered 250 after handling it


async def test_unknown_altered_and_oversized_mail_is_refused_at_the_door(
    replies: Replies,
) -> None:
    request, cards = await replies.park()
    to = cards["bob"].message["Reply-To"].addresses[0].addr_spec
    local, _, domain = to.partition("@")

    for stranger in (f"postmaster@{domain}", f"{local[:-3]}aaa@{domain}", "bob@example.com"):
        with pytest.raises(aiosmtplib.SMTPRecipientsRefused) as refused:
            await replies.reply(stranger, "approve")
        assert refused.value.recipients[0].code == 550
    with pytest.raises(aiosmtplib.SMTPResponseException) as too_big:
        await replies.reply(to, "approve " + "x" * MAX_MESSAGE_BYTES)
    assert too_big.value.code == 552

    assert await _status(replies.api, request) == TakeoverStatus.PENDING
    assert await replies.queued_answers() == 0


async def test_mail_made_to_be_slow_to_read_is_refused_and_the_server_goes_on(
    replies: Replies,
) -> None:
    request, cards = await replies.park()
    to = cards["bob"].message["Reply-To"].addresses[0].addr_spec
    quotes = "\r\n ".join('"' * 900 for _ in range(56))  # 50,000: 22 s for the email package
    made_up = [
        f"From: {quotes} <bob@example.com>\r\nTo: {to}\r\n\r\napprove\r\n",
        f"From: bob@example.com\r\nTo: {to}\r\n{nested_parts(1000)}",
    ]

    for raw in made_up:
        with pytest.raises(aiosmtplib.SMTPResponseException) as refused:
            await aiosmtplib.send(
                raw.encode(), hostname="127.0.0.1", port=replies.port,
                sender="bob@example.com", recipients=[to], start_tls=False, timeout=30,
            )  # fmt: skip
        assert refused.value.code == 554, refused.value.message
    assert await _status(replies.api, request) == TakeoverStatus.PENDING
    assert await replies.queued_answers() == 0

    await replies.reply(to, "approve")  # the next reply is read as ever

    await wait_status(replies.api.engine, request.run_id, RunStatus.COMPLETED)
    assert await _status(replies.api, request) == TakeoverStatus.RELEASED


def nested_parts(depth: int) -> str:
    head = tail = ""
    for i in range(depth):
        head += f'Content-Type: multipart/mixed; boundary="b{i}"\r\n\r\n--b{i}\r\n'
        tail = f"\r\n--b{i}--\r\n" + tail
    return f"{head}Content-Type: text/plain\r\n\r\napprove{tail}"


async def test_a_mailbox_that_is_nobodys_gets_no_reply_address(
    migrated_db_url: str, smtp: SmtpServer
) -> None:
    inbound = f"inbound: {{port: {free_port()}, domain: {DOMAIN}}}"
    channels = '["email:ops@example.com"]'
    async with email_api(migrated_db_url, smtp, channels, clock=ManualClock(), more=inbound) as api:
        await api.engine.runs.start_run("refund", INPUT, AGENT)
        [card] = await received(smtp, 1)
    assert card.message["Reply-To"] is None
    assert "Replies to this address are not read." in card.part("plain")
