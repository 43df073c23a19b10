"""Reply to decide: an SMTP server (``aiosmtpd``) that takes replies to approval emails and
decides as their recipient, once (``smtp.inbound``; off unless configured).

It accepts mail only for this deployment's signed reply addresses (``bot.email.reply_addresses``),
refusing any other recipient at ``RCPT`` (550: it is no relay and no mailbox), and any message
outside what it reads (over 1 MB: 552; too many parts or an overlong header: 554,
``bot.email.incoming``). For each reply:

* mail that answers itself is dropped without an answer, so two robots never write to each
  other: a bounce (empty envelope sender), ``Auto-Submitted`` other than ``no`` (out-of-office
  replies, Signoff's own answers), ``Precedence: bulk/junk/list``, a ``List-Id``;
* the ``From:`` address must be the recipient's own ``email:`` in ``people:``: a reply address
  forwarded to someone else decides nothing (and a sender who is nobody's mailbox in
  ``people:`` is not answered either: the server writes to no stranger);
* the first word of the text decides (``bot.email.replies``), through the same path as the
  recipient's signed link (``engine.services.links.ApprovalLinks.decide``): the same rules of who
  may decide, and the same single use, so a reply and a click of that person's link count once;
* every reply that is not dropped is answered (``Answer``): what was decided, or what was read
  and why it decided nothing (already decided, expired, not approve or deny, not theirs).

Sender addresses are only as trustworthy as the mail server in front of this one: a real
deployment puts it behind its own MTA, which checks SPF/DKIM/DMARC and relays only the reply
domain here (docs/email.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiosmtpd.smtp import SMTP

from bot import replies
from bot.email.incoming import Incoming, Unreadable, read
from bot.email.replies import read_reply
from bot.email.reply_addresses import ReplyAddress, ReplyAddresses
from cards.templating import words
from engine.domain.errors import AlreadyDecided, LinkUsed, NotFound, SignoffError
from engine.domain.model import TakeoverRequest

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 1024 * 1024  # a reply with a forwarded thread fits; an attachment does not
SESSION_TIMEOUT_SECONDS = 60.0  # a client silent this long is disconnected
MAX_RECIPIENTS = 5  # reply addresses of ours in one message


@dataclass(frozen=True)
class Answer:
    """What Signoff writes back to a reply: to its sender, in its thread."""

    to: str
    subject: str
    text: str
    in_reply_to: str | None  # the reply's Message-ID
    request_id: str
    key: str  # once per reply and recipient: a redelivered reply is not answered twice


@dataclass(frozen=True)
class ReplyDesk:
    """What the server needs of the engine: the reply addresses, the people's mailboxes,
    deciding as a person through their single-use link, and sending an answer."""

    addresses: ReplyAddresses
    mailboxes: Callable[[], Mapping[str, str]]  # person -> their people: email, as it stands
    decide: Callable[[ReplyAddress, str, str | None], Awaitable[TakeoverRequest]]
    answer: Callable[[Answer], Awaitable[None]]


class InboundHandler:
    """The aiosmtpd handler (module docstring)."""

    def __init__(self, desk: ReplyDesk) -> None:
        self.desk = desk

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        if self.desk.addresses.read(address, self.desk.mailboxes()) is None:
            return "550 5.1.1 No such mailbox here"
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            return "452 4.5.3 Too many recipients"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        try:
            reply = read(envelope.original_content, envelope.mail_from)
        except Unreadable as exc:
            log.info("inbound mail from %r refused: %s", envelope.mail_from, exc)
            return f"554 5.6.0 Not read: {exc}"
        if reply.automatic:
            log.info("inbound mail from %r dropped: it answers itself", envelope.mail_from)
            return "250 OK: not answered (automatic mail)"
        for rcpt in envelope.rcpt_tos:
            address = self.desk.addresses.read(rcpt, self.desk.mailboxes())
            if address is not None:  # people: may have changed since RCPT
                await self._reply(address, reply, envelope.original_content)
        return "250 OK"

    async def _reply(self, address: ReplyAddress, reply: Incoming, raw: bytes) -> None:
        sender = reply.sender
        known = {m.casefold() for m in self.desk.mailboxes().values()}
        if sender is None or sender.casefold() not in known:
            # Nobody to decide as, and nobody Signoff writes to: answering any sender would
            # make this server a way to send mail to strangers.
            log.info("a reply for %s from %r is not from a person's mailbox", address.request_id,
                     sender)  # fmt: skip
            return
        text = await self._outcome(address, sender, reply.text)
        subject, message_id = reply.subject, reply.message_id
        seen = message_id or hashlib.sha256(raw).hexdigest()[:32]
        await self.desk.answer(
            Answer(
                to=sender,
                subject=(subject if subject.lower().startswith("re:") else f"Re: {subject}")[:200],
                text=text,
                in_reply_to=message_id,
                request_id=address.request_id,
                key=f"{seen}:{address.request_id}:{address.person}",
            )
        )

    async def _outcome(self, address: ReplyAddress, sender: str, text: str) -> str:
        """What the reply did, in the words its answer says it."""
        own = self.desk.mailboxes().get(address.person)
        if own is None or sender.casefold() != own.casefold():
            return (
                "Replies to this address are accepted only from the mailbox the approval "
                "email was sent to, so this reply decided nothing."
            )
        reading = read_reply(text)
        if reading.verb is None:
            began = f"began with “{reading.first_word}”" if reading.first_word else "was empty"
            return (
                f"Your reply {began}, which is not approve or deny, so it decided nothing. "
                "Reply with approve or deny as its first word, and a reason after it if you "
                "like."
            )
        try:
            decided = await self.desk.decide(address, reading.verb, reading.reason)
        except LinkUsed:
            return "You already decided this request, so this reply decided nothing."
        except AlreadyDecided as exc:
            happened = words("STATUS_PAST").get(exc.current or "", "was already decided")
            by = f" by {exc.decided_by}" if exc.decided_by and exc.current != "expired" else ""
            return f"This request {happened}{by} before your reply, so it decided nothing."
        except NotFound:
            return replies.NO_REQUEST
        except SignoffError as exc:
            kind = replies.refusal(exc)
            if kind is None:
                raise
            if kind is replies.Refusal.UNAVAILABLE:
                return replies.UNAVAILABLE
            return replies.sentence(exc.message)
        verb = "approved" if reading.verb == "grant" else "denied"
        because = f", with your reason: {reading.reason}" if reading.reason else ""
        return f"You {verb} “{decided.reason}”{because}. Thank you."


async def serve(desk: ReplyDesk, host: str, port: int, *, hostname: str) -> asyncio.Server:
    """The inbound SMTP server on ``host``:``port``, on the running loop (``server.close()``
    and ``await server.wait_closed()`` stop it). ``hostname``: the name it greets with."""
    handler = InboundHandler(desk)
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: SMTP(
            handler,
            data_size_limit=MAX_MESSAGE_BYTES,
            hostname=hostname,
            ident="Signoff",
            timeout=SESSION_TIMEOUT_SECONDS,
            loop=loop,
        ),
        host,
        port,
    )
