"""Slack over Socket Mode: Signoff opens a WebSocket to Slack instead of serving an HTTP endpoint.

For a laptop or a deployment with no inbound HTTPS (``slack.socketMode: true``). The socket is
slack-bolt's aiohttp handler (``AsyncSocketModeHandler``) around the same ``AsyncApp`` the HTTP
endpoint uses, so everything reaches the same listeners through the same middleware: ``ActOnce``
(an event by its ``event_id``; anything else by its payload, which Slack sends again unchanged
when it redelivers an envelope), the same answers, and the same shape checks, which here refuse
a malformed envelope by acknowledging it without acting (a socket has no 400 to answer, and an
unacknowledged envelope would only come back).

The connection, and why it is made this way:

* ``apps.connections.open`` (with the app-level ``xapp-`` token) goes to ``slack.apiBaseUrl``
  through bolt's client, so a test points it at a local fake. It answers a one-use WebSocket
  URL; Slack then sends ``hello`` and envelopes, each acknowledged with its ``envelope_id``
  (and the listener's answer as ``payload`` where Slack takes one: a slash command's reply,
  a modal's errors). As over HTTP, a listener commits before its acknowledgement leaves.
* It is opened after the engine started (``on_startup``) and closed before the engine stops
  (``on_shutdown``), so no envelope arrives at an engine that cannot act on it. Opening runs in
  a task of its own: a Slack outage at start leaves the REST API and the web pages serving
  while slack_sdk keeps trying, every ``ping_seconds``.
* Reconnecting is slack_sdk's: a socket closed by Slack, or one found dead by the ping every
  ``ping_seconds``, is replaced through a new ``apps.connections.open``, and a ``disconnect``
  envelope (``refresh_requested``, sent before Slack retires a socket) opens the new one
  before the old one goes. An envelope Slack did not see acknowledged comes again on the new
  socket (``retry_attempt`` + 1): ``ActOnce`` acknowledges it without acting a second time.
* The proxy is the one ``NO_PROXY``'s rules choose for ``slack.apiBaseUrl`` (Slack's WebSocket
  hosts are under the same ``slack.com``): slack_sdk would read ``HTTPS_PROXY`` itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from urllib.parse import urlencode

from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.slack.shape import shape_problem
from engine.config.channels import SlackConfig
from engine.domain.proxies import ProxySettings

log = logging.getLogger(__name__)

PING_SECONDS = 10.0  # slack-bolt's default: how often a quiet socket is checked, and retried


def envelope_problem(req: SocketModeRequest) -> str | None:
    """Why an envelope's payload is not one Slack sends (``bot.slack.shape``, the checks of the
    HTTP endpoint, on the payload as it would have come over HTTP), or None."""
    if req.type == "events_api":
        return shape_problem(json.dumps(req.payload).encode(), "application/json")
    if req.type == "interactive":
        body = urlencode({"payload": json.dumps(req.payload)})
        return shape_problem(body.encode(), "application/x-www-form-urlencoded")
    if req.type == "slash_commands":
        # Over HTTP every field is form text; here they are JSON values, which bolt reads
        # leniently: the texts are checked as the form's are, and the command must be one.
        if not isinstance(req.payload.get("command"), str):
            return "a slash command needs its command"
        fields = {k: v for k, v in req.payload.items() if isinstance(v, str)}
        return shape_problem(urlencode(fields).encode(), "application/x-www-form-urlencoded")
    return None  # other envelope types reach bolt, which acknowledges what it does not take


class SignoffSocketHandler(AsyncSocketModeHandler):
    """bolt's handler, with the HTTP endpoint's shape checks in front of the app."""

    async def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        problem = envelope_problem(req)
        if problem is not None:
            log.warning("refused a Slack %s envelope: %s", req.type, problem)
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        await super().handle(client, req)


class SocketMode:
    """The Socket Mode connection of one app: opened at startup, closed at shutdown."""

    def __init__(
        self,
        bolt: AsyncApp,
        config: SlackConfig,
        proxies: ProxySettings,
        *,
        ping_seconds: float = PING_SECONDS,
    ) -> None:
        self.bolt = bolt
        self.config = config
        self.proxies = proxies
        self.ping_seconds = ping_seconds  # a test shortens it to see a dead socket sooner
        self.handler: SignoffSocketHandler | None = None
        self._opening: asyncio.Task[None] | None = None

    def install(self, app: web.Application) -> None:
        app.on_startup.append(self._start)
        app.on_shutdown.append(self._stop)

    async def _start(self, _: web.Application) -> None:
        # Made here, in the running loop: the client makes its HTTP session and tasks at once.
        handler = SignoffSocketHandler(
            self.bolt,
            app_token=self.config.app_token,
            logger=log,
            ping_interval=self.ping_seconds,
        )
        handler.client.proxy = self.proxies.proxy_for(self.config.api_base_url)
        self.handler = handler
        self._opening = asyncio.get_running_loop().create_task(
            self._open(handler), name="signoff-slack-socket"
        )

    async def _open(self, handler: SignoffSocketHandler) -> None:
        await handler.connect_async()  # type: ignore[no-untyped-call]  # retries until connected
        if not handler.client.closed:
            log.info("Slack Socket Mode connected")

    async def _stop(self, _: web.Application) -> None:
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._opening
        if self.handler is not None:
            await self.handler.close_async()  # type: ignore[no-untyped-call]
            self.handler = None
