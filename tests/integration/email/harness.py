"""An API server whose email channel sends to a real SMTP server (``tests.support.smtp``)."""

from __future__ import annotations

import re
import ssl
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp.test_utils import TestServer

from bot.app import create_app
from bot.email.sink import EmailSink
from bot.keys import ENGINE, LINKS
from engine.assembly import EngineOptions
from engine.config import parse_config
from engine.config.channels import SmtpConfig
from engine.domain.model import TakeoverRequest
from tests.support.api import Api, serving
from tests.support.clock import ManualClock
from tests.support.engines import wait_for
from tests.support.ids import SequentialIds
from tests.support.smtp import Received, SmtpServer

SENDER = "signoff@signoff.test"
PEOPLE = """
people:
  alice: {email: alice@example.com, tz: Europe/Berlin}
  bob: {email: bob@example.com}
  carol: {email: carol@example.com, tz: America/New_York}
  dave: {email: dave@example.com}
groups:
  finance: [alice, bob, carol]
admins: [alice]
approvers: [finance]
"""
FLOW = """
refund:
  nodes:
    - {id: approve, type: approval, reason: "Refund {{ input.amount }} for {{ input.order }}",
       approvers: [finance], channels: %s, timeoutMinutes: 60, remindBeforeMinutes: 15}
    - {id: pay, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}}
"""
_LINK = re.compile(r"http://signoff\.test/approvals/\S+")


def smtp_yaml(port: int, security: str = "none", more: str = "") -> str:
    return (
        f"smtp: {{host: 127.0.0.1, port: {port}, security: {security}, from: {SENDER}, "
        f"timeoutSeconds: 2{', ' + more if more else ''}}}\n"
    )


@asynccontextmanager
async def email_api(
    db_url: str,
    smtp: SmtpServer,
    channels: str = '["email:@finance"]',
    *,
    clock: ManualClock,
    security: str = "none",
    more: str = "",
    tls_context: ssl.SSLContext | None = None,
    flow: str | None = None,
) -> AsyncIterator[Api]:
    text = (
        f"database: {{url: '{db_url}'}}\n"
        "server: {workers: 8, leaseSeconds: 30, pollSeconds: 0.05, "
        "publicUrl: 'http://signoff.test', secretKey: 'email-test-secret-0123456789abcdef'}\n"
        + PEOPLE
        + smtp_yaml(smtp.port, security, more)
        + "workflows:\n"
        + textwrap.indent(textwrap.dedent(flow or FLOW % channels), "  ")
    )
    config = parse_config(text, {})
    opts = EngineOptions(clock=clock, ids=SequentialIds("id"), owner="email-worker")
    app = create_app(config, opts)
    if tls_context is not None:  # trust the test's self-signed certificate
        engine = app[ENGINE]
        sink = EmailSink(engine, config.section(SmtpConfig), app[LINKS], tls_context=tls_context)
        engine.add_sink("email", sink)
    async with serving(TestServer(app)) as api:
        yield api


def links_in(message: Received) -> list[str]:
    return _LINK.findall(message.part("plain"))


async def received(smtp: SmtpServer, count: int) -> list[Received]:
    """Wait until the server holds at least ``count`` messages."""
    await wait_for(lambda: len(smtp.messages) >= count)
    return list(smtp.messages)


async def outbox_statuses(api: Api, run_id: str) -> list[str]:
    return [status for _, status, _ in await api.engine.store.outbox_messages(run_id=run_id)]


async def requests_of(api: Api, run_id: str) -> list[TakeoverRequest]:
    return await api.engine.store.list_takeovers(run_id=run_id)
