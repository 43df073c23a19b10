"""Delivering the outbox by email, through the SMTP server of ``smtp:``, with ``aiosmtplib``.

Only the outbox dispatcher calls this (never a request handler), so a message is written in
the transaction that caused it and inherits the outbox's dedupe, retries with backoff and
per-channel pacing; ``smtp.minIntervalSeconds`` paces this server as a whole on top of it.

Recipients. ``email:@alice`` is alice's ``people:`` email, with alice's own signed link (while
she may decide the request); a literal ``email:ops@example.com`` is that mailbox with the
approval page's plain link, which asks whoever opens it to sign in, unless the mailbox is a
person's, who then gets their own link. Times are shown in the recipient's ``people:`` ``tz``.

What each outbox message becomes: a card is the thread's first message; a notice is a reply
in it (``bot.email.message``); an answer to a reply to decide (``bot.email.answers``) is a
reply in that reply's thread; a card update sends nothing, since a sent email cannot change
and the decision's own notice, queued with every update (``engine.domain.notify``), is the
reply that says what happened.

Errors. A 5xx answer (550 unknown user, 552 too large, 535 refused sign-in ...) fails for good:
no retry can change it. A 4xx answer (421, 451), a refused or dropped connection and a
timeout are retried by the outbox with backoff; the retry carries the same ``Message-ID``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import aiosmtplib

from bot.email.answers import ANSWER, answer_of
from bot.email.message import Envelope, build_message, message_id, thread_id
from bot.email.reply_addresses import ReplyAddresses
from bot.views import approval_view
from cards.email.render import Email, render_email_card, render_email_notice, thread_subject
from cards.notice_fields import (
    REQUEST_NOTICES,
    confidence_fields,
    request_notice_fields,
    step_result_fields,
)
from cards.notices import NOTICES, Mention, NoticeKind
from cards.view import ApprovalView
from engine.assembly import Engine
from engine.config.channels import SmtpConfig, addressed_person
from engine.domain.errors import DeliveryError, NotFound, SignoffError
from engine.domain.model import OutboxRecord, TakeoverRequest
from engine.services.links import ApprovalLinks

log = logging.getLogger(__name__)

MAX_INLINE_WAIT = 2.0  # a pacing wait longer than this goes back to the outbox


@dataclass(frozen=True)
class Recipient:
    address: str
    person: str | None  # the person whose mailbox it is, if it is anyone's
    tz: str | None


@dataclass(frozen=True)
class Outgoing:
    """A rendered message and where it goes in the thread."""

    content: Email
    message_id: str
    in_reply_to: str | None
    reply_to: str | None = None  # the recipient's reply address, when a reply decides


class EmailSink:
    """The outbox sink of the ``email`` channel."""

    min_interval = 0.0  # per recipient; the server's own pacing is ``smtp.minIntervalSeconds``

    def __init__(
        self,
        engine: Engine,
        smtp: SmtpConfig,
        links: ApprovalLinks,
        *,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        self.engine = engine
        self.smtp = smtp
        self.links = links
        self.tls_context = tls_context  # None: the system's trusted CAs, hostnames checked
        inbound = smtp.inbound
        self.replies = (
            None if inbound is None else ReplyAddresses(links.signer, inbound.local, inbound.domain)
        )
        self._pacing = asyncio.Lock()
        self._next_send = 0.0  # loop time before which the server gets nothing more

    async def deliver(self, message: OutboxRecord) -> None:
        if not self.smtp.enabled:
            raise DeliveryError("smtp: is not configured (host and from)", permanent=True)
        if message.kind == "card_update":
            return  # the decision's notice is the reply (module docstring)
        if message.kind not in ("card", "notice", ANSWER):
            raise DeliveryError(f"unknown message kind {message.kind!r}", permanent=True)
        try:
            recipient = self.recipient(message.channel)
            if message.kind == ANSWER:
                outgoing: Outgoing | None = Outgoing(*answer_of(message, self.smtp.from_domain))
            else:
                outgoing = await self.compose(message, recipient)
        except NotFound as exc:
            raise DeliveryError(exc.message, permanent=True) from exc
        except DeliveryError:
            raise
        except SignoffError as exc:  # the database: try again later
            raise DeliveryError(exc.message) from exc
        if outgoing is None:
            return
        envelope = Envelope(
            sender=self.smtp.from_address,
            recipient=recipient.address,
            message_id=outgoing.message_id,
            in_reply_to=outgoing.in_reply_to,
            date=self.engine.clock.now(),
            reply_to=outgoing.reply_to,
            answering=message.kind == ANSWER,
        )
        try:
            mail = build_message(envelope, outgoing.content)
        except ValueError as exc:
            raise DeliveryError(str(exc), permanent=True) from exc
        await self._paced_send(mail, recipient.address)

    # -- recipients and content ----------------------------------------------------------------

    def recipient(self, channel: str) -> Recipient:
        """Who ``channel`` (``email:@alice``, ``email:ops@example.com``) reaches."""
        people = self.engine.config.people
        name = addressed_person(channel)
        if name is not None:
            found = people.get(name)
            if found is None or not found.email:
                raise DeliveryError(
                    f"{name} has no email in people:, so no email can reach them", permanent=True
                )
            return Recipient(found.email, name, found.tz)
        address = channel.partition(":")[2]
        owner = self.engine.config.person_by_email(address)
        return Recipient(address, owner.name if owner else None, owner.tz if owner else None)

    async def compose(self, message: OutboxRecord, recipient: Recipient) -> Outgoing | None:
        """What ``message`` says to ``recipient``, as things stand now; None: nothing to send."""
        payload = message.payload
        domain = self.smtp.from_domain
        kind = payload.get("notice")
        request = await self._request_of(message)
        if message.kind == "card":
            if request is None:
                raise DeliveryError("a card that names no request", permanent=True)
            view = await self._view(request)
            link, personal = self._link(request, view, recipient)
            reply_to = self._reply_to(request, recipient, personal)
            # Milliseconds of pure Python (up to 20,000 characters of arguments, escaped
            # twice): in a thread, as the Slack cards are, so the loop keeps answering.
            content = await asyncio.to_thread(
                partial(render_email_card, replies=reply_to is not None),
                view,
                link=link,
                tz=recipient.tz,
                personal=personal,
            )
            return Outgoing(content, thread_id(request.id, message.channel, domain), None, reply_to)
        if kind not in {k.value for k in NoticeKind}:
            return None
        notice_kind = NoticeKind(str(kind))
        fields: dict[str, Any]
        thread: ApprovalView | None = await self._view(request) if request is not None else None
        if notice_kind in REQUEST_NOTICES:
            if request is None or thread is None:
                return None
            fields = request_notice_fields(notice_kind, request, thread, payload, _names)
        elif notice_kind is NoticeKind.CONFIDENCE:
            run = await self.engine.queries.get_run(str(payload.get("runId", "")))
            fields = {**confidence_fields(payload), "agent": run.agent}
        else:
            fields = step_result_fields(payload, message.run_id)
        link, reply_to = None, None
        if request is not None and thread is not None:
            link, personal = self._link(request, thread, recipient)
            reply_to = self._reply_to(request, recipient, personal)
            if "approval_url" in fields:
                fields["approval_url"] = link
        notice = NOTICES[notice_kind](**fields)
        # A requester told in their own mailbox, where no card went, gets a message of its own.
        in_thread = request is not None and message.channel in request.channels
        subject = f"Re: {thread_subject(thread)}" if thread is not None and in_thread else None
        content = render_email_notice(
            f"notice_{notice_kind.value}",
            notice,
            tz=recipient.tz,
            link=link,
            subject=subject,
            replies=reply_to is not None,
        )
        root = thread_id(request.id, message.channel, domain) if request and in_thread else None
        return Outgoing(content, message_id(message.dedupe_key, domain), root, reply_to)

    async def _request_of(self, message: OutboxRecord) -> TakeoverRequest | None:
        """The request ``message`` is about: the one it names, else (a step's result, a
        confidence score) the run's newest request sent to this channel, whose thread it joins
        (the request of the step itself first: a gated step's own)."""
        request_id = message.request_id or message.payload.get("requestId")
        if isinstance(request_id, str):
            return await self.engine.queries.get_takeover(request_id)
        if message.run_id is None:
            return None
        requests = await self.engine.queries.list_takeovers(run_id=message.run_id)
        step = message.payload.get("stepId")
        mine = [r for r in requests if message.channel in r.channels]
        return max(mine, key=lambda r: (r.step_id == step, r.created_at), default=None)

    async def _view(self, request: TakeoverRequest) -> ApprovalView:
        return await approval_view(self.engine, request)

    def _link(
        self, request: TakeoverRequest, view: ApprovalView, recipient: Recipient
    ) -> tuple[str | None, bool]:
        """The link the recipient's message carries, and whether it is theirs alone: their
        signed link while they may decide, else the approval page (which asks to sign in)."""
        person = recipient.person
        if person is not None and not request.is_final and person in self.links.deciders(request):
            return self.links.url(request, person), True
        return view.approval_url, False

    def _reply_to(
        self, request: TakeoverRequest, recipient: Recipient, personal: bool
    ) -> str | None:
        """The recipient's reply address, when a reply from them can decide the request: reply
        to decide is on and the message carries their own link."""
        if self.replies is None or not personal or recipient.person is None:
            return None
        return self.replies.address(request.id, recipient.person)

    # -- sending -------------------------------------------------------------------------------

    async def _paced_send(self, mail: Any, to: str) -> None:
        interval = self.smtp.min_interval_seconds
        if interval <= 0:
            await self._send(mail, to)
            return
        async with self._pacing:
            loop = asyncio.get_running_loop()
            wait = self._next_send - loop.time()
            if wait > MAX_INLINE_WAIT:
                raise DeliveryError("pacing the SMTP server (minIntervalSeconds)", retry_after=wait)
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                await self._send(mail, to)
            finally:
                self._next_send = loop.time() + interval

    async def _send(self, mail: Any, to: str) -> None:
        smtp = self.smtp
        try:
            await aiosmtplib.send(
                mail,
                sender=smtp.from_address,
                recipients=[to],
                hostname=smtp.host,
                port=smtp.port,
                username=smtp.user or None,
                password=smtp.password or None,
                use_tls=smtp.security == "tls",
                start_tls=smtp.security == "starttls",
                timeout=smtp.timeout_seconds,
                tls_context=self.tls_context,
            )
        except aiosmtplib.SMTPRecipientsRefused as exc:
            codes = [r.code for r in exc.recipients]
            text = "; ".join(f"{r.code} {r.message}" for r in exc.recipients)[:300]
            raise DeliveryError(
                f"the SMTP server refused {to}: {text}", permanent=all(c >= 500 for c in codes)
            ) from exc
        except aiosmtplib.SMTPResponseException as exc:
            raise DeliveryError(
                f"the SMTP server answered {exc.code} {exc.message[:300]}",
                permanent=exc.code >= 500,
            ) from exc
        except (aiosmtplib.SMTPException, OSError) as exc:  # refused, dropped, timed out
            where = f"{smtp.host}:{smtp.port}"
            raise DeliveryError(f"SMTP {where}: {type(exc).__name__}: {exc}") from exc
        log.debug("emailed %s to %s", mail["Message-ID"], to)


def _names(people: Iterable[str]) -> list[Mention]:
    """People as an email names them: by name (``cards.notice_fields.Mentions``)."""
    return list(people)
