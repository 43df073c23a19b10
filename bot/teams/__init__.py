"""The Microsoft Teams front end, on the same aiohttp app as the API.

    install(app, engine)   mounts POST /api/messages and registers the ``teams`` outbox sink

Modules: ``adapter`` (the only one importing the Bot Framework SDK), ``handlers`` (activities
to engine calls), ``messages`` (cards and notices as Teams shows them), ``sink`` (outbox
delivery), ``pacing`` (Teams rate limits), ``package`` (``signoff teams package``).

The endpoint is always mounted. With ``teams.appId`` set every request must carry a Bot
Framework JWT that validates against that app id; without one, requests are accepted
unauthenticated, which is only for local testing (the Agents Playground, the tests) and is
logged as a warning at start.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from bot.teams.adapter import BadActivity, NotAuthenticated, TeamsAdapter
from bot.teams.handlers import TeamsHandlers
from bot.teams.pacing import Pacing
from bot.teams.sink import TeamsSink
from engine.background import cancel_and_wait
from engine.runtime import Engine

log = logging.getLogger(__name__)

ROUTE = "/api/messages"
# The SDK's own refresh happens, blocking the event loop, once the keys are a day old.
METADATA_REFRESH_SECONDS = 6 * 3600


def install(app: web.Application, engine: Engine) -> None:
    """Mount the Teams endpoint on ``app`` and deliver ``teams:`` outbox messages."""
    adapter = TeamsAdapter(engine.config.teams, pace=Pacing().call)
    handlers = TeamsHandlers(engine)
    engine.add_sink("teams", TeamsSink(engine, adapter))

    async def messages(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": "the body is not JSON"}, status=400)
        auth_header = request.headers.get("Authorization", "")
        try:
            # The SDK's CloudAdapter.process() would answer every invoke with HTTP 500 here
            # (botbuilder 4.17.x); TeamsAdapter.process calls process_activity instead.
            invoke = await adapter.process(auth_header, body, handlers.on_activity)
        except NotAuthenticated as exc:
            log.warning("teams: rejected an unauthenticated request: %s", exc)
            return web.json_response({"error": "unauthorized"}, status=401)
        except BadActivity as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if invoke is None:
            return web.Response(status=200)
        return web.json_response(invoke.body, status=invoke.status)

    async def refresh_keys(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(_refresh_keys(adapter)) if adapter.authenticated else None
        yield
        if task is not None:
            await cancel_and_wait(task)

    app.router.add_post(ROUTE, messages)
    app.cleanup_ctx.append(refresh_keys)
    if not adapter.authenticated:
        log.warning(
            "teams: no teams.appId configured, so %s accepts UNAUTHENTICATED requests; "
            "this is for local testing only",
            ROUTE,
        )


async def _refresh_keys(adapter: TeamsAdapter) -> None:
    while True:
        try:
            await adapter.warm_openid_metadata()
        except Exception as exc:  # the SDK will try itself on the next request
            log.warning("teams: fetching the Bot Framework signing keys failed: %s", exc)
        await asyncio.sleep(METADATA_REFRESH_SECONDS)


__all__ = ["ROUTE", "install"]
