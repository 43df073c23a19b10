"""A real SMTP server for tests (aiosmtpd), on a loopback port of the test's own event loop.

It is as strict as the servers users send through: lines of at most 1,000 characters (RFC 5321
4.5.3.1.6: aiosmtpd answers 500), a message size limit it advertises (``SIZE``) and enforces
(552), a ``MAIL FROM`` that must be a plain address (553 otherwise, and for the null sender),
a message as RFC 5322 has it (550 5.7.1, as Gmail answers, for one without exactly one
``From``, ``Date`` and ``Message-ID <id@domain>``, or with two ``Subject`` or ``To``), and,
when given a certificate, STARTTLS before anything else (530) with AUTH only over TLS and
only with the right password (535). It records what it accepted (``messages``), and can be told
to refuse the next messages with a code (``refuse``: 421 and 451 at DATA, 550 at RCPT, as real
servers do) or to hang without answering (``hang``), before or after it stored the message.

``tls_pair()`` makes a self-signed certificate for 127.0.0.1 with ``cryptography``: the server's
context, and a client context that trusts only it.

``SIGNOFF_REQUIRE_SMTP=1`` (CI) makes ``require_aiosmtpd()`` fail instead of skipping when
aiosmtpd cannot be imported.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email
import email.policy
import ipaddress
import os
import re
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

import pytest

REQUIRE_SMTP_VAR = "SIGNOFF_REQUIRE_SMTP"
SIZE_LIMIT = 512 * 1024
_MAILBOX = re.compile(r"[^@\s<>]+@[^@\s<>]+\Z")
_MESSAGE_ID = re.compile(r"<[^<>@\s]+@[^<>@\s]+>\Z")
_HEADER_COUNTS = {  # RFC 5322 3.6: how many of each a message may have
    "From": (1, 1),
    "Date": (1, 1),
    "Message-ID": (1, 1),  # optional in RFC 5322; Gmail refuses a message without one
    **{name: (0, 1) for name in ("Subject", "To", "Reply-To", "In-Reply-To", "References")},
}


def require_aiosmtpd() -> None:
    """Skip (or, with ``SIGNOFF_REQUIRE_SMTP=1``, fail) when aiosmtpd is missing."""
    try:
        import aiosmtpd.smtp  # noqa: F401
    except ImportError as exc:
        reason = f"aiosmtpd is not importable: {exc}"
        if os.environ.get(REQUIRE_SMTP_VAR) == "1":
            pytest.fail(f"{reason} (and {REQUIRE_SMTP_VAR}=1)", pytrace=False)
        pytest.skip(reason)


@dataclass(frozen=True)
class Received:
    """One message the server accepted."""

    mail_from: str
    rcpt_tos: tuple[str, ...]
    raw: bytes
    tls: bool
    login: str | None

    @property
    def message(self) -> EmailMessage:
        parsed = email.message_from_bytes(self.raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        return parsed

    @property
    def message_id(self) -> str:
        return str(self.message["Message-ID"])

    def part(self, subtype: str) -> str:
        """The text of the ``text/<subtype>`` part."""
        found = self.message.get_body(preferencelist=(subtype,))
        assert found is not None and found.get_content_subtype() == subtype, subtype
        content = found.get_content()
        assert isinstance(content, str)
        return content


@dataclass
class _Fault:
    kind: str  # "refuse" | "hang"
    code: int = 0
    after_storing: bool = False


@dataclass
class SmtpServer:
    """What the server accepted and what it is told to do next (module docstring)."""

    size_limit: int = SIZE_LIMIT
    users: dict[str, str] = field(default_factory=dict)
    messages: list[Received] = field(default_factory=list)
    attempts: int = 0  # DATA commands seen, accepted or not
    port: int = 0
    _faults: list[_Fault] = field(default_factory=list)
    _hung: list[asyncio.Event] = field(default_factory=list)

    def refuse(self, code: int, count: int = 1) -> None:
        """Refuse the next ``count`` messages with ``code`` (550: at RCPT; others: at DATA)."""
        self._faults.extend(_Fault("refuse", code) for _ in range(count))

    def hang(self, count: int = 1, *, after_storing: bool = False) -> None:
        """Answer nothing to the next ``count`` messages' DATA, having stored them or not."""
        self._faults.extend(_Fault("hang", after_storing=after_storing) for _ in range(count))

    def message_ids(self) -> list[str]:
        return [m.message_id for m in self.messages]

    def to(self, address: str) -> list[Received]:
        return [m for m in self.messages if address in m.rcpt_tos]

    # -- aiosmtpd handler hooks ----------------------------------------------------------------

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if not _MAILBOX.match(address or ""):
            return "553 5.1.7 a sender address is required"
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if not _MAILBOX.match(address):
            return "553 5.1.3 not a mailbox"
        if self._faults and self._faults[0].kind == "refuse" and self._faults[0].code == 550:
            self._faults.pop(0)
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.attempts += 1
        fault = self._faults.pop(0) if self._faults else None
        if fault is not None and fault.kind == "refuse":
            return f"{fault.code} 4.3.0 try again later"
        problem = _format_problem(bytes(envelope.original_content or envelope.content))
        if problem is not None:
            return problem
        received = Received(
            mail_from=envelope.mail_from,
            rcpt_tos=tuple(envelope.rcpt_tos),
            raw=bytes(envelope.original_content or envelope.content),
            tls=session.ssl is not None,
            login=_login(session),
        )
        if fault is not None:  # hang: the client times out waiting
            if fault.after_storing:
                self.messages.append(received)
            event = asyncio.Event()
            self._hung.append(event)
            await event.wait()
            return "421 4.3.0 shutting down"
        self.messages.append(received)
        return "250 2.0.0 queued"

    def authenticate(
        self, server: Any, session: Any, envelope: Any, mechanism: str, data: Any
    ) -> Any:
        from aiosmtpd.smtp import AuthResult, LoginPassword

        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login, password = data.login.decode(), data.password.decode()
        ok = self.users.get(login) == password and bool(password)
        return AuthResult(success=ok, handled=False, auth_data=login if ok else None)

    def release(self) -> None:
        for event in self._hung:
            event.set()


def _format_problem(raw: bytes) -> str | None:
    """What a strict receiving server says of ``raw``'s format, or None when it takes it."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    for name, (low, high) in _HEADER_COUNTS.items():
        found = message.get_all(name) or []
        if not low <= len(found) <= high:
            return f"550 5.7.1 {len(found)} {name} headers: RFC 5322 3.6 wants {low} to {high}"
    if not _MESSAGE_ID.match(str(message["Message-ID"]).strip()):
        return "550 5.7.1 the Message-ID is not a valid <id@domain>"
    return None


def _login(session: Any) -> str | None:
    data = getattr(session, "auth_data", None)
    return data if isinstance(data, str) else None


@asynccontextmanager
async def smtp_server(
    *,
    tls: ssl.SSLContext | None = None,
    implicit_tls: bool = False,
    users: dict[str, str] | None = None,
    size_limit: int = SIZE_LIMIT,
) -> AsyncIterator[SmtpServer]:
    """An SMTP server on 127.0.0.1. ``tls``: the server's context; with it the server requires
    STARTTLS before anything else (or, ``implicit_tls``, speaks TLS from the start). ``users``:
    logins and passwords it requires AUTH with (over TLS)."""
    require_aiosmtpd()
    from aiosmtpd.smtp import SMTP

    state = SmtpServer(size_limit=size_limit, users=dict(users or {}))
    loop = asyncio.get_running_loop()
    starttls = tls if tls is not None and not implicit_tls else None

    def protocol() -> SMTP:
        return SMTP(
            state,
            data_size_limit=size_limit,
            hostname="smtp.test",
            tls_context=starttls,
            require_starttls=starttls is not None,
            auth_required=bool(users),
            auth_require_tls=True,
            authenticator=state.authenticate,
            loop=loop,
        )

    server = await loop.create_server(protocol, "127.0.0.1", 0, ssl=tls if implicit_tls else None)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        state.release()
        server.close()
        await server.wait_closed()


def tls_pair() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context) for a fresh self-signed certificate of 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        with open(cert_path, "wb") as f:
            f.write(cert_pem)
        with open(key_path, "wb") as f:
            f.write(key_pem)
        server.load_cert_chain(cert_path, key_path)
    client = ssl.create_default_context(cadata=cert_pem.decode())
    return server, client
