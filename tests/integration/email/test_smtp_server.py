"""The tests' SMTP server is as strict as the servers users send through: it refuses what they
refuse, so a sink that passes against it does not fail against them."""

from __future__ import annotations

import sys
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

import aiosmtplib
import pytest

from tests.support.smtp import REQUIRE_SMTP_VAR, require_aiosmtpd, smtp_server, tls_pair


def _message(body: str = "hello") -> EmailMessage:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "a@example.com", "b@example.com", "hi"
    msg["Date"], msg["Message-ID"] = formatdate(), make_msgid(domain="example.com")
    msg.set_content(body)
    return msg


async def _send_raw(port: int, raw: bytes) -> None:
    """``raw`` as it is, from a@example.com to b@example.com."""
    await aiosmtplib.send(
        raw,
        sender="a@example.com",
        recipients=["b@example.com"],
        hostname="127.0.0.1",
        port=port,
        timeout=10,
    )


async def test_a_message_must_have_its_rfc_5322_headers_once() -> None:
    good = _message().as_bytes(policy=_message().policy.clone(linesep="\r\n"))
    no_id = good.replace(b"Message-ID:", b"X-Message-ID:")
    two_from = b"From: c@example.com\r\n" + good
    bad_id = good.replace(b"Message-ID: <", b"Message-ID: no-brackets-")
    async with smtp_server() as smtp:
        for raw in (no_id, two_from, bad_id):
            with pytest.raises(aiosmtplib.SMTPDataError) as refused:
                await _send_raw(smtp.port, raw)
            assert refused.value.code == 550, refused.value.message
        assert smtp.messages == []
        await _send_raw(smtp.port, good)
        assert len(smtp.messages) == 1


async def test_a_sender_is_required_and_must_be_an_address() -> None:
    async with smtp_server() as smtp:
        for sender in ("", "not-an-address"):
            with pytest.raises(aiosmtplib.SMTPSenderRefused) as caught:
                await aiosmtplib.send(
                    _message(), sender=sender, hostname="127.0.0.1", port=smtp.port, timeout=10
                )
            assert caught.value.code == 553
        assert smtp.messages == []


async def test_lines_over_1000_characters_and_messages_over_the_size_limit_are_refused() -> None:
    async with smtp_server(size_limit=20_000) as smtp:
        raw = b"From: a@example.com\r\nTo: b@example.com\r\n\r\n" + b"x" * 1200 + b"\r\n"
        with pytest.raises(aiosmtplib.SMTPDataError) as long_line:
            await _send_raw(smtp.port, raw)
        assert long_line.value.code == 500
        big = _message(("y" * 70 + "\n") * 400)
        with pytest.raises(aiosmtplib.SMTPResponseException) as too_big:
            await aiosmtplib.send(big, hostname="127.0.0.1", port=smtp.port, timeout=10)
        assert too_big.value.code == 552
        assert smtp.messages == []


async def test_starttls_comes_before_anything_and_auth_needs_the_password() -> None:
    server_tls, client_tls = tls_pair()
    async with smtp_server(tls=server_tls, users={"u": "p"}) as smtp:
        with pytest.raises(aiosmtplib.SMTPResponseException) as plain:
            await aiosmtplib.send(
                _message(), hostname="127.0.0.1", port=smtp.port, start_tls=False, timeout=10
            )
        assert plain.value.code == 530
        with pytest.raises(aiosmtplib.SMTPResponseException) as anonymous:
            await aiosmtplib.send(
                _message(), hostname="127.0.0.1", port=smtp.port, tls_context=client_tls, timeout=10
            )
        assert anonymous.value.code == 530
        await aiosmtplib.send(
            _message(),
            hostname="127.0.0.1",
            port=smtp.port,
            tls_context=client_tls,
            username="u",
            password="p",
            timeout=10,
        )
        (received,) = smtp.messages
        assert received.tls and received.login == "u"


def test_without_aiosmtpd_the_tests_skip_or_fail_when_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "aiosmtpd.smtp", None)
    monkeypatch.delenv(REQUIRE_SMTP_VAR, raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_aiosmtpd()
    monkeypatch.setenv(REQUIRE_SMTP_VAR, "1")
    with pytest.raises(pytest.fail.Exception):
        require_aiosmtpd()
