"""The email channel: ``email:<address>``, ``email:<person or group>`` (with or without "@")
and ``email`` alone (each approver) in ``channels:`` send each approval as an email, through
the SMTP server of ``smtp:`` (``bot.email.sink``), one thread per request and recipient
(``bot.email.message``); the content is ``cards.email``'s rendering of the one approval view.
A person's email is their ``people:`` ``email``; their ``tz`` sets the times they read.
Deciding is on the approval page the email links to: the signed links come from the console
(``app[LINKS]``), installed before any channel (``bot.app``). See docs/email.md.
"""

from __future__ import annotations

from aiohttp import web

from bot.email.sink import EmailSink
from bot.keys import LINKS
from bot.plugin import Channel
from engine.assembly import Engine
from engine.config.channels import SmtpConfig

NAME = "email"


def install(app: web.Application, engine: Engine) -> None:
    """Register the outbox sink (unless the engine was given one, as tests do)."""
    if NAME not in engine.dispatcher.sinks:
        smtp = engine.config.section(SmtpConfig)
        engine.add_sink(NAME, EmailSink(engine, smtp, app[LINKS]))


CHANNEL = Channel(NAME, install, person_field="email")
