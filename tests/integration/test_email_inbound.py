"""Reply to decide (``bot.email.inbound``), over real SMTP: aiosmtplib sends replies to the
aiosmtpd server Signoff runs, in front of a real engine on SQLite and PostgreSQL. A reply
"approve" from the recipient's mailbox decides once and is answered; a second reply is answered
that it decided nothing; forwarded, automatic, unknown and oversized mail decides nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

import aiosmtplib
import pytest

from bot.email.inbound import MAX_MESSAGE_BYTES, Answer, ReplyDesk, serve
from bot.email.reply_addresses import ReplyAddress, ReplyAddresses
from engine.domain.model import RunStatus, TakeoverRequest, TakeoverStatus
from engine.services.links import ApprovalLink
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_status
from tests.support.web import REFUND_DEMO, pending_request, web_of

DOMAIN = "replies.example.com"


@dataclass
class Inbound:
    api: Api
    addresses: ReplyAddresses
    port: int
    answers: list[Answer] = field(default_factory=list)

    def address(self, request: TakeoverRequest, person: str) -> str:
        return self.addresses.address(request.id, person)

    async def send(
        self,
        to: str,
        text: str,
        *,
        sender: str = "bob@example.com",
        envelope_from: str | None = None,
        headers: dict[str, str] | None = None,
        html: str | None = None,
    ) -> Any:
        message = EmailMessage()
        message["From"] = sender
        message["To"] = to
        message["Subject"] = "Re: Approval needed: Refund 37.51 EUR for A-1042"
        message["Message-ID"] = f"<reply-{len(self.answers)}-{id(text)}@mail.example.com>"
        for name, value in (headers or {}).items():
            message[name] = value
        if html is None:
            message.set_content(text)
        else:
            message.set_content(html, subtype="html")  # HTML only, as some clients send
        return await aiosmtplib.send(
            message,
            hostname="127.0.0.1",
            port=self.port,
            sender=envelope_from if envelope_from is not None else sender,
            recipients=[to],
            start_tls=False,
            timeout=30,
        )


@pytest.fixture
async def inbound(migrated_db_url: str) -> AsyncIterator[Inbound]:
    async with running_api(migrated_db_url, REFUND_DEMO, clock=ManualClock()) as api:
        links = web_of(api.client).links
        engine = api.engine
        addresses = ReplyAddresses(links.signer, "signoff", DOMAIN)
        answers: list[Answer] = []

        async def decide(address: ReplyAddress, verb: str, reason: str | None) -> TakeoverRequest:
            request = await engine.store.get_takeover(address.request_id)
            link = ApprovalLink(request.id, address.person, request.expires_at, "email-reply")
            return await links.decide(link, verb, reason)

        async def answer(found: Answer) -> None:
            answers.append(found)

        people = engine.config.people
        desk = ReplyDesk(
            addresses=addresses,
            people=lambda: people,
            email_of=lambda name: people[name].email if name in people else None,
            request=engine.store.get_takeover,
            decide=decide,
            answer=answer,
        )
        server = await serve(desk, "127.0.0.1", 0, hostname="signoff.test")
        port = server.sockets[0].getsockname()[1]
        try:
            yield Inbound(api, addresses, port, answers)
        finally:
            server.close()
            await server.wait_closed()


async def _parked(api: Api) -> TakeoverRequest:
    run, _ = await api.engine.runs.start_run("refund-demo", {"order": "A-1042"}, AGENT)
    return await pending_request(api.engine, run.id)


async def _status(api: Api, request: TakeoverRequest) -> TakeoverStatus:
    return (await api.engine.store.get_takeover(request.id)).status


async def test_a_reply_approve_decides_once_and_a_second_is_answered(inbound: Inbound) -> None:
    api = inbound.api
    request = await _parked(api)
    to = inbound.address(request, "bob")

    await inbound.send(to, "Approve: checked with the customer\n\nOn Sat, Signoff wrote:\n> deny")

    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)
    after = await api.engine.store.get_takeover(request.id)
    assert after.status == TakeoverStatus.RELEASED and after.decided_by == "bob"
    assert after.notes == "checked with the customer"
    [answer] = inbound.answers
    assert answer.to == "bob@example.com" and answer.request_id == request.id
    assert answer.subject == "Re: Approval needed: Refund 37.51 EUR for A-1042"
    assert answer.text.startswith("You approved “Refund 37.51 EUR for A-1042”")
    assert "checked with the customer" in answer.text
    assert answer.in_reply_to is not None and answer.in_reply_to.startswith("<reply-")

    await inbound.send(to, "approve")  # bob again, the same reply address
    await inbound.send(inbound.address(request, "carol"), "deny", sender="carol@example.com")

    again, carols = inbound.answers[1:]
    assert again.text == "You already decided this request, so this reply decided nothing."
    assert (
        carols.text == "This request was approved by bob before your reply, so it decided nothing."
    )
    ledger = await api.engine.store.ledger(run_id=request.run_id)
    assert [e["action"] for e in ledger] == ["lookup", "refund"]  # the refund ran once


async def test_deny_with_a_reason_from_an_html_reply(inbound: Inbound) -> None:
    api = inbound.api
    request = await _parked(api)
    html = (
        "<div>Deny &ndash; duplicate of A-1041<br></div>"
        "<blockquote>Approve or deny: Refund 37.51 EUR</blockquote>"
    )

    await inbound.send(inbound.address(request, "carol"), "", sender="carol@example.com", html=html)

    after = await api.engine.store.get_takeover(request.id)
    assert after.status == TakeoverStatus.DENIED and after.decided_by == "carol"
    assert after.notes == "duplicate of A-1041"


async def test_replies_that_decide_nothing_are_answered_why(inbound: Inbound) -> None:
    api = inbound.api
    request = await _parked(api)
    to = inbound.address(request, "bob")

    await inbound.send(to, "yes please go ahead")
    await inbound.send(to, "approve", sender="mallory@example.net")  # a forwarded email

    assert await _status(api, request) == TakeoverStatus.PENDING
    understood, forwarded = inbound.answers
    assert "began with “yes”, which is not approve or deny" in understood.text
    assert forwarded.to == "mallory@example.net"
    assert "accepted only from the mailbox the approval email was sent to" in forwarded.text
    assert await api.engine.store.link_use(request.id, "bob") is None


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
    inbound: Inbound, headers: dict[str, str], envelope_from: str | None
) -> None:
    request = await _parked(inbound.api)

    await inbound.send(
        inbound.address(request, "bob"), "approve", headers=headers, envelope_from=envelope_from
    )

    assert await _status(inbound.api, request) == TakeoverStatus.PENDING
    assert inbound.answers == []


async def test_unknown_altered_and_oversized_mail_is_refused_at_the_door(
    inbound: Inbound,
) -> None:
    request = await _parked(inbound.api)
    to = inbound.address(request, "bob")
    local, _, domain = to.partition("@")

    for stranger in (f"postmaster@{domain}", f"{local[:-3]}aaa@{domain}", "bob@example.com"):
        with pytest.raises(aiosmtplib.SMTPRecipientsRefused) as refused:
            await inbound.send(stranger, "approve")
        assert refused.value.recipients[0].code == 550
    with pytest.raises(aiosmtplib.SMTPResponseException) as too_big:
        await inbound.send(to, "approve " + "x" * MAX_MESSAGE_BYTES)
    assert too_big.value.code == 552

    assert await _status(inbound.api, request) == TakeoverStatus.PENDING
    assert inbound.answers == []
