"""One email as it goes on the wire: headers, the text and HTML parts, and its thread.

Threads. Every recipient has one thread per request: the card's ``Message-ID`` is derived from
the request id, the outbox channel (``email:@alice``, ``email:ops@example.com``) and the domain
of ``smtp.from`` (``thread_id``), so it is the same on every attempt, in every process; each
notice about the request (a vote, the decision, a reminder, an escalation, the expiry) is a
reply to it (``In-Reply-To`` and ``References``, subject "Re: <the card's subject>"), with a
``Message-ID`` of its own derived from its outbox dedupe key (``message_id``): a retry after a
timeout that reached the server sends the same id again, which a mail store files once.

A reply to decide (``smtp.inbound``) goes to ``Reply-To``, the recipient's signed reply address
(``bot.email.reply_addresses``); Signoff's answer to such a reply is text alone, in the reply's
own thread, marked ``Auto-Submitted: auto-replied``.

Headers are built by ``email.message.EmailMessage`` under the SMTP policy, from values that
cannot carry a line break: addresses must match ``MAILBOX`` and subjects are one line
(``cards.email.render.subject_line``); the policy refuses anything else rather than fold it.
Both parts are sent quoted-printable: ASCII lines of at most 76 characters, so a long argument
or a non-ASCII name fits SMTP's 1,000-character lines and servers without ``8BITMIME``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime

from cards.email.render import Email
from engine.config.channels.smtp import MAILBOX_RE

SENDER_NAME = "Signoff"


def _hashed(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def thread_id(request_id: str, channel: str, domain: str) -> str:
    """The ``Message-ID`` of the card of ``request_id`` sent to ``channel``: its thread's root."""
    return f"<card.{_hashed(request_id, channel)}@{domain}>"


def message_id(dedupe_key: str, domain: str) -> str:
    """The ``Message-ID`` of the outbox message with ``dedupe_key`` (not a card)."""
    return f"<notice.{_hashed(dedupe_key)}@{domain}>"


@dataclass(frozen=True)
class Envelope:
    """Who a message goes to and where it sits in its thread."""

    sender: str  # smtp.from
    recipient: str  # a MAILBOX
    message_id: str
    in_reply_to: str | None  # the thread's root, for every message but the card
    date: datetime
    reply_to: str | None = None  # the recipient's signed reply address (reply to decide)
    answering: bool = False  # an answer to a reply (RFC 3834 "auto-replied")


def build_message(envelope: Envelope, content: Email) -> EmailMessage:
    """The message for ``envelope`` with ``content``; ``ValueError`` for an address that is not
    a plain mailbox."""
    for address in (envelope.sender, envelope.recipient, envelope.reply_to or envelope.sender):
        if not MAILBOX_RE.match(address):
            raise ValueError(f"not a plain email address: {address[:100]!r}")
    msg = EmailMessage(policy=SMTP)
    msg["From"] = Address(SENDER_NAME, addr_spec=envelope.sender)
    msg["To"] = Address(addr_spec=envelope.recipient)
    subject = content.subject
    if envelope.in_reply_to is not None and not subject.startswith("Re: "):
        subject = f"Re: {subject}"
    msg["Subject"] = subject
    msg["Date"] = format_datetime(envelope.date)
    msg["Message-ID"] = envelope.message_id
    if envelope.reply_to is not None:
        msg["Reply-To"] = Address(SENDER_NAME, addr_spec=envelope.reply_to)
    if envelope.in_reply_to is not None:
        msg["In-Reply-To"] = envelope.in_reply_to
        msg["References"] = envelope.in_reply_to
    # RFC 3834: a machine wrote this; auto-responders (out of office) must not answer it.
    msg["Auto-Submitted"] = "auto-replied" if envelope.answering else "auto-generated"
    msg["X-Auto-Response-Suppress"] = "All"  # Exchange's own way of saying the same
    # Quoted-printable: short ASCII lines whatever the text, for servers without 8BITMIME.
    msg.set_content(content.text, cte="quoted-printable")
    if content.html:  # an answer to a reply is text alone
        msg.add_alternative(content.html, subtype="html", cte="quoted-printable")
    return msg
