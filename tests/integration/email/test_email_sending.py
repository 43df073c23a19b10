"""Sending through a real SMTP server that refuses, hangs, limits lines and requires TLS and a
password: retried with the same Message-ID, given up on permanent refusals, never doubled."""

from __future__ import annotations

import pytest

from engine.domain.model import RunStatus
from tests.integration.email.harness import email_api, links_in, received
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_for
from tests.support.smtp import SmtpServer, smtp_server, tls_pair
from tests.support.waiting import quiet

INPUT = {"order": "A-7", "amount": "3.00"}
OPS = '["email:ops@example.com"]'
WAIT = 60.0  # real seconds at most; a loaded machine only makes it slower, never wrong


async def _card_row(api: Api, run_id: str) -> tuple[int, str, str | None]:
    """The card's (attempts, status, last error); (0, "", None) until it is queued."""
    rows = await api.engine.store.outbox_messages(run_id=run_id)
    cards = [(r.attempts, str(status), error) for r, status, error in rows if r.kind == "card"]
    assert len(cards) <= 1
    return cards[0] if cards else (0, "", None)


async def _retry_after_attempt(api: Api, clock: ManualClock, run_id: str, attempts: int) -> str:
    """Wait until the card's ``attempts``-th attempt has failed and is recorded, then move the
    clock past its retry time (moved only then: an attempt in flight keeps its claim)."""

    async def failed() -> str | None:
        done, _, error = await _card_row(api, run_id)
        return error if done >= attempts and error else None

    error: str = await wait_for(failed, WAIT)
    clock.advance(minutes=10)
    api.engine.wake_outbox()
    return error


async def _sent(api: Api, run_id: str) -> bool:
    return (await _card_row(api, run_id))[1] == "sent"


async def test_refusals_and_timeouts_are_retried_and_one_message_arrives(
    migrated_db_url: str, smtp: SmtpServer
) -> None:
    clock = ManualClock()
    smtp.refuse(451)
    smtp.hang(1)
    async with email_api(migrated_db_url, smtp, OPS, clock=clock) as api:
        run, _ = await api.engine.runs.start_run("refund", INPUT, AGENT)
        first = await _retry_after_attempt(api, clock, run.id, 1)
        assert "451" in first
        second = await _retry_after_attempt(api, clock, run.id, 2)
        assert "Timeout" in second or "timed out" in second.lower()
        await wait_for(lambda: _sent(api, run.id), WAIT)
    assert smtp.attempts == 3
    assert len(smtp.messages) == 1 and smtp.messages[0].rcpt_tos == ("ops@example.com",)


async def test_a_timeout_after_the_server_stored_it_resends_the_same_message_id(
    migrated_db_url: str, smtp: SmtpServer
) -> None:
    clock = ManualClock()
    smtp.hang(1, after_storing=True)
    async with email_api(migrated_db_url, smtp, OPS, clock=clock) as api:
        run, _ = await api.engine.runs.start_run("refund", INPUT, AGENT)
        await _retry_after_attempt(api, clock, run.id, 1)
        await wait_for(lambda: _sent(api, run.id), WAIT)
    # Two copies reached the server; a mail store files them as one message (one Message-ID).
    assert len(smtp.messages) == 2
    assert len(set(smtp.message_ids())) == 1


async def test_a_permanent_refusal_is_not_retried(migrated_db_url: str, smtp: SmtpServer) -> None:
    clock = ManualClock()
    smtp.refuse(550)
    async with email_api(migrated_db_url, smtp, OPS, clock=clock) as api:
        run, _ = await api.engine.runs.start_run("refund", INPUT, AGENT)

        async def failed() -> bool:
            return (await _card_row(api, run.id))[1] == "failed"

        await wait_for(failed, WAIT)
        attempts, _, error = await _card_row(api, run.id)
        assert attempts == 1 and error is not None and "550" in error
        clock.advance(minutes=20)  # past any retry time, before the reminder and the deadline
        api.engine.wake_outbox()
        await quiet(0.3)
        assert (await _card_row(api, run.id))[:2] == (1, "failed")
        assert (await api.engine.store.get_run(run.id)).status is RunStatus.WAITING
    assert smtp.messages == [] and smtp.attempts == 0


@pytest.mark.parametrize(("password", "outcome"), [("s3cret-pass", "sent"), ("wrong", "failed")])
async def test_starttls_and_a_password_are_used_and_a_wrong_one_is_given_up(
    migrated_db_url: str, password: str, outcome: str
) -> None:
    server_tls, client_tls = tls_pair()
    async with smtp_server(tls=server_tls, users={"signoff": "s3cret-pass"}) as smtp:
        async with email_api(
            migrated_db_url,
            smtp,
            OPS,
            clock=ManualClock(),
            security="starttls",
            more=f"user: signoff, password: {password}",
            tls_context=client_tls,
        ) as api:
            run, _ = await api.engine.runs.start_run("refund", INPUT, AGENT)

            async def done() -> str | None:
                status = (await _card_row(api, run.id))[1]
                return status if status in ("sent", "failed") else None

            assert await wait_for(done, WAIT) == outcome, await _card_row(api, run.id)
            if outcome == "failed":  # 535: no retry signs in with the same password
                assert "535" in str((await _card_row(api, run.id))[2])
    if outcome == "sent":
        (message,) = smtp.messages
        assert message.tls and message.login == "signoff"
    else:
        assert smtp.messages == []


async def test_implicit_tls(migrated_db_url: str) -> None:
    server_tls, client_tls = tls_pair()
    async with smtp_server(tls=server_tls, implicit_tls=True) as smtp:
        async with email_api(
            migrated_db_url, smtp, OPS, clock=ManualClock(), security="tls", tls_context=client_tls
        ) as api:
            run, _ = await api.engine.runs.start_run("refund", INPUT, AGENT)
            await wait_for(lambda: _sent(api, run.id), WAIT)
    assert len(smtp.messages) == 1


async def test_arguments_longer_than_an_smtp_line_arrive_whole(
    migrated_db_url: str, smtp: SmtpServer
) -> None:
    long = "x" * 5000  # one JSON line of 5,000 characters; SMTP allows 1,000 per line
    async with email_api(migrated_db_url, smtp, OPS, clock=ManualClock()) as api:
        await api.engine.runs.start_run("refund", {"order": "A-8", "amount": long}, AGENT)
        (message,) = await received(smtp, 1)
    assert max(len(line) for line in message.raw.split(b"\r\n")) <= 998
    assert message.raw.isascii()  # no 8BITMIME needed
    assert f'"amount": "{long}"' in message.part("plain")
    assert long in message.part("html")


async def test_a_mailbox_gets_the_page_and_a_persons_mailbox_their_own_link(
    migrated_db_url: str, smtp: SmtpServer
) -> None:
    channels = '["email:ops@example.com", "email:bob@example.com"]'
    async with email_api(migrated_db_url, smtp, channels, clock=ManualClock()) as api:
        await api.engine.runs.start_run("refund", INPUT, AGENT)
        mails = {m.rcpt_tos[0]: m for m in await received(smtp, 2)}
    (ops,) = links_in(mails["ops@example.com"])
    assert "sig=" not in ops and ops.startswith("http://signoff.test/approvals/")
    assert "asks you to sign in" in mails["ops@example.com"].part("plain")
    (bob,) = links_in(mails["bob@example.com"])
    assert "p=bob&" in bob and "sig=" in bob


async def test_email_alone_is_each_approver(migrated_db_url: str, smtp: SmtpServer) -> None:
    flow = """
    pick:
      nodes:
        - {id: approve, type: approval, reason: "Go?", approvers: [bob, dave], channels: [email]}
    """
    async with email_api(migrated_db_url, smtp, clock=ManualClock(), flow=flow) as api:
        run, _ = await api.engine.runs.start_run("pick", {}, AGENT)
        (request,) = await wait_for(lambda: api.engine.store.list_takeovers(run_id=run.id))
        assert request.channels == ("email:@bob", "email:@dave")
        mails = await received(smtp, 2)
    assert sorted(m.rcpt_tos[0] for m in mails) == ["bob@example.com", "dave@example.com"]
    assert {m.message["Subject"] for m in mails} == {"Approval needed: Approve step approve — Go?"}


async def test_the_server_is_paced_as_a_whole(migrated_db_url: str, smtp: SmtpServer) -> None:
    channels = '["email:ops@example.com", "email:audit@example.com"]'
    more = "minIntervalSeconds: 3600"
    async with email_api(migrated_db_url, smtp, channels, clock=ManualClock(), more=more) as api:
        run, _ = await api.engine.runs.start_run("refund", INPUT, AGENT)

        async def one_sent_one_paced() -> list[tuple[str, str | None]] | None:
            rows = await api.engine.store.outbox_messages(run_id=run.id)
            cards = sorted(
                ((str(status), error) for r, status, error in rows if r.kind == "card"),
                key=lambda card: (card[0], card[1] or ""),  # both may be pending, one erred
            )
            return cards if len(cards) == 2 and cards[1][0] == "sent" and cards[0][1] else None

        (paced, _) = await wait_for(one_sent_one_paced, WAIT)
    assert paced[0] == "pending" and "minIntervalSeconds" in str(paced[1])
    assert len(smtp.messages) == 1  # the other waits its turn in the outbox, not in a task
