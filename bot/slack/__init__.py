"""Slack: approval cards in threads, buttons that decide, ``/signoff``, one HTTP endpoint.

``install(app, engine)`` mounts ``POST /slack/events`` (interactivity, slash commands and
events, all signature-checked by bolt), or with ``slack.socketMode`` opens a Socket Mode
connection instead (``socket.py``: no endpoint, no signing secret), and registers the outbox
sink that posts cards and notices; installed through OAuth (``slack.clientId``) it also mounts
``GET /slack/install`` and ``GET /slack/oauth_redirect``. Every slack_bolt / slack_sdk import
lives in this package. Modules:

    bolt.py        the AsyncApp: verification, authorization, listeners
    actions.py     card buttons and the deny modal
    click.py       a button click as the handlers read it (who, which workspace, what)
    home.py        the Home tab: pending approvals and recent decisions, kept current
    people.py      Slack user <-> person: people: ids, then email; direct message channels
    commands.py    /signoff and @mentions
    sink.py        outbox delivery: threads, direct messages, posting once, rate limits, errors
    refused.py     telling the decider when Slack refuses a card update
    render.py      outbox records as Slack messages (through ``cards``)
    api.py         the Web API calls, on one session, each with its workspace's token
    installs.py    workspaces: their bot tokens (sealed.py) and who their users are
    oauth.py       the install pages (bolt's OAuth flow)
    background.py  follow-up work after an acknowledgement
    socket.py      Socket Mode: the same app over a WebSocket to Slack
"""

from __future__ import annotations

import logging

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier

from bot.plugin import Channel
from bot.slack.api import SlackApi
from bot.slack.background import Background
from bot.slack.bolt import build_bolt_app
from bot.slack.home import HomeTabs
from bot.slack.installs import SealedInstallationStore, Workspaces
from bot.slack.oauth import INSTALL_PATH, REDIRECT_PATH
from bot.slack.people import SlackPeople
from bot.slack.sealed import TokenSeal
from bot.slack.shape import shape_problem, signed, timestamp_problem
from bot.slack.sink import SlackSink
from bot.slack.socket import SocketMode
from engine.assembly import Engine

NAME = "slack"  # its address prefix in channels: (slack:<channel id>, slack:@<person>, slack:dm)
EVENTS_PATH = "/slack/events"
BOLT = web.AppKey("slack_bolt", AsyncApp)  # the bolt app serving Slack, for tests to reach
SOCKET = web.AppKey("slack_socket", SocketMode)  # its Socket Mode connection, when on
log = logging.getLogger(__name__)


def install(app: web.Application, engine: Engine) -> None:
    """Mount Slack on ``app`` when ``slack.signingSecret`` and ``slack.botToken`` (or
    ``clientId`` and ``clientSecret``) are set, or connect over Socket Mode when
    ``slack.socketMode`` is on with ``slack.appToken`` and ``slack.botToken``."""
    config = engine.config.slack
    if not config.enabled:
        return
    workspaces: Workspaces | None = None
    if config.oauth:  # the configuration refused OAuth without server.secretKey
        seal = TokenSeal(engine.config.server.secret_key)
        store = SealedInstallationStore(
            config.client_id,
            engine.shared_sql_engine(),
            seal,
            reader=engine.shared_sql_engine(reads_only=True),
        )
        workspaces = Workspaces(lambda: engine.config, store)
    api = SlackApi(config, engine.config.proxies, workspaces)
    background = Background()
    people = SlackPeople(engine, api)
    home = HomeTabs(engine, api, background, people)
    bolt = build_bolt_app(engine, api, background, people, home)
    engine.add_sink(NAME, SlackSink(engine, api, on_change=home.changed, people=people))
    app[BOLT] = bolt

    # Follow-ups (Home tabs, replies) read the database: they finish before it closes.
    engine.before_close(background.drain)

    async def close(_: web.Application) -> None:
        # After the engine stopped (cleanup contexts run first): nothing posts any more.
        await background.drain()
        await api.close()

    app.on_cleanup.append(close)
    if engine.config.slack.socket_mode:
        socket = SocketMode(bolt, engine.config.slack, engine.config.proxies)
        app[SOCKET] = socket
        socket.install(app)
        return

    verifier = SignatureVerifier(engine.config.slack.signing_secret)

    async def events(request: web.Request) -> web.Response:
        body = await request.read()
        stamp = timestamp_problem(request.headers)
        if stamp is not None:  # unsigned by definition: refused before anything reads the body
            return web.json_response({"error": "invalid_signature", "message": stamp}, status=401)
        if signed(verifier, body, request.headers):
            problem = shape_problem(body, request.content_type)
            if problem is not None:
                log.warning("refused a signed Slack request: %s", problem)
                return web.json_response(
                    {"error": "invalid_payload", "message": problem}, status=400
                )
        # Unsigned requests go on to bolt, whose own verification answers 401.
        response = await bolt.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(response)

    async def oauth(request: web.Request) -> web.Response:
        flow = bolt.oauth_flow
        assert flow is not None
        bolt_request = await to_bolt_request(request)
        if request.path == INSTALL_PATH:
            response = await flow.handle_installation(bolt_request)
        else:
            response = await flow.handle_callback(bolt_request)
        return await to_aiohttp_response(response)

    app.router.add_post(EVENTS_PATH, events)
    if workspaces is not None:
        app.router.add_get(INSTALL_PATH, oauth)
        app.router.add_get(REDIRECT_PATH, oauth)


CHANNEL = Channel(NAME, install, person_field="slack")
