"""The email channel: ``email:<address>``, ``email:<person or group>`` (with or without "@")
and ``email`` alone (each approver) in ``channels:`` send each approval as an email, through
the SMTP server of ``smtp:`` (``bot.email.sink``), one thread per request and recipient
(``bot.email.message``); the content is ``cards.email``'s rendering of the one approval view.
A person's email is their ``people:`` ``email``; their ``tz`` sets the times they read.
Deciding is on the approval page the email links to: the signed links come from the console
(``app[LINKS]``), installed before any channel (``bot.app``). With ``smtp.inbound``, a reply
decides too (``bot.email.inbound``: Signoff's own SMTP server, started and stopped with the
app). See docs/email.md.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from bot.email.answers import answer_message
from bot.email.inbound import Answer, ReplyDesk, serve
from bot.email.reply_addresses import ReplyAddress, ReplyAddresses
from bot.email.sink import EmailSink
from bot.keys import LINKS
from bot.plugin import Channel
from engine.assembly import Engine
from engine.config.channels import SmtpConfig
from engine.domain.model import TakeoverRequest
from engine.services.links import ApprovalLink, ApprovalLinks

log = logging.getLogger(__name__)

NAME = "email"


def install(app: web.Application, engine: Engine) -> None:
    """Register the outbox sink (unless the engine was given one, as tests do), and serve
    replies to decide when ``smtp.inbound`` says where."""
    smtp = engine.config.section(SmtpConfig)
    if NAME not in engine.dispatcher.sinks:
        engine.add_sink(NAME, EmailSink(engine, smtp, app[LINKS]))
    if smtp.inbound is not None:
        app.cleanup_ctx.append(_inbound(engine, smtp, app[LINKS]))


def _inbound(
    engine: Engine, smtp: SmtpConfig, links: ApprovalLinks
) -> Callable[[web.Application], AsyncIterator[None]]:
    inbound = smtp.inbound
    assert inbound is not None

    def mailboxes() -> dict[str, str]:  # as configured now: a reload changes people:
        return {name: p.email for name, p in engine.config.people.items() if p.email}

    async def decide(address: ReplyAddress, verb: str, reason: str | None) -> TakeoverRequest:
        """As the person's own signed link decides: the same rules, the same single use."""
        request = await engine.queries.get_takeover(address.request_id)
        link = ApprovalLink(request.id, address.person, request.expires_at, signature="")
        return await links.decide(link, verb, reason)

    async def answer(found: Answer) -> None:
        await engine.chat.queue_messages([answer_message(found)], engine.clock.now())
        engine.wake_outbox()

    desk = ReplyDesk(
        addresses=ReplyAddresses(links.signer, inbound.local, inbound.domain),
        mailboxes=mailboxes,
        decide=decide,
        answer=answer,
    )

    async def serving(app: web.Application) -> AsyncIterator[None]:
        server = await serve(desk, inbound.host, inbound.port, hostname=inbound.domain)
        log.info("email: replies to decide on %s:%s (%s)", inbound.host, inbound.port,
                 inbound.domain)  # fmt: skip
        yield
        server.close()
        await server.wait_closed()

    return serving


CHANNEL = Channel(NAME, install, person_field="email")
