"""The Teams channel's record (``CHANNEL``) and what it installs on the app: the route, the
sink, the key refresh. The package docstring (``bot.teams``) says how a caller is verified."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from bot.plugin import Channel
from bot.teams.adapter import BadActivity, ForeignTenant, NotAuthenticated, TeamsAdapter
from bot.teams.handlers import TeamsHandlers
from bot.teams.pacing import Pacing
from bot.teams.refusals import RefusalLog
from bot.teams.sink import TeamsSink
from engine.assembly import Engine
from engine.background import cancel_and_wait
from engine.domain.errors import InvalidRequest
from engine.domain.json_input import parse_json
from engine.ports import Clock

log = logging.getLogger(__name__)

ROUTE = "/api/messages"
# Keys are kept a day (bot.teams.tokens); refreshing well before keeps requests from waiting.
NAME = "teams"  # its address prefix in channels: (teams:<conversation>)
METADATA_REFRESH_SECONDS = 6 * 3600
# The kinds of refusal the log counts (``bot.teams.refusals``).
UNAUTHENTICATED = "unauthenticated"
WRONG_TENANT = "wrong_tenant"


def install(app: web.Application, engine: Engine) -> None:
    """Mount the Teams endpoint on ``app`` and deliver ``teams:`` outbox messages, when
    ``teams.appId`` or ``teams.insecureLocalDev`` is set (module docstring)."""
    config = engine.config.teams
    if not config.enabled:
        log.info("teams: no teams.appId configured, so %s is not mounted", ROUTE)
        return
    adapter = TeamsAdapter(config, pace=Pacing().call, proxies=engine.config.proxies)
    handlers = TeamsHandlers(engine)
    refusals = RefusalLog(engine.clock, logger=log)  # bounded: anyone can make us refuse
    engine.add_sink(NAME, TeamsSink(engine, adapter))

    async def messages(request: web.Request) -> web.Response:
        try:
            await adapter.authenticate(request.headers.get("Authorization", ""))
        except NotAuthenticated as exc:
            refusals.refused(UNAUTHENTICATED, "rejected an unauthenticated request", exc)
            return _error(401, "unauthorized", "a valid Bot Framework token is required")
        try:
            body = parse_json(await request.read(), "the activity")
        except web.HTTPRequestEntityTooLarge as exc:
            return _error(413, "too_large", exc.reason)
        except InvalidRequest as exc:
            return _error(400, "invalid_json", exc.message)
        try:
            # The SDK's CloudAdapter.process() would answer every invoke with HTTP 500 here
            # (botbuilder 4.17.x); TeamsAdapter.process calls process_activity instead.
            invoke = await adapter.process(
                request.headers.get("Authorization", ""), body, handlers.on_activity
            )
        except NotAuthenticated as exc:
            refusals.refused(UNAUTHENTICATED, "rejected an unauthenticated request", exc)
            return _error(401, "unauthorized", "a valid Bot Framework token is required")
        except BadActivity as exc:
            return _error(400, "invalid_activity", str(exc))
        except ForeignTenant as exc:
            refusals.refused(WRONG_TENANT, "refused an activity from another tenant", exc)
            return _error(
                403, "wrong_tenant", f"{exc}: this bot serves one tenant; nothing changed"
            )
        if invoke is None:
            return web.Response(status=200)
        return web.json_response(invoke.body, status=invoke.status)

    async def background(app: web.Application) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(refusals.run())]
        if adapter.authenticated:
            tasks.append(asyncio.create_task(_refresh_keys(adapter, engine.clock)))
        yield
        for task in tasks:
            await cancel_and_wait(task)

    app.router.add_post(ROUTE, messages)
    app.cleanup_ctx.append(background)
    if not adapter.authenticated:
        log.warning(
            "teams: teams.insecureLocalDev is ON: %s accepts UNSIGNED requests, and anyone "
            "who can reach it acts as any person it names. For local testing only; never "
            "in production",
            ROUTE,
        )
        if config.tenant_id:
            log.warning(
                "teams: teams.tenantId is set, so only activities naming tenant %s are "
                "accepted (the Agents Playground names its own tenant: set the same id there)",
                config.tenant_id,
            )


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status)


async def _refresh_keys(adapter: TeamsAdapter, clock: Clock) -> None:
    # Keys are fetched on the first request anyway; fetching ahead keeps requests from waiting.
    while True:
        await adapter.keys.renew()
        await clock.sleep(METADATA_REFRESH_SECONDS)  # the engine's clock: tests move it


__all__ = ["ROUTE", "install"]


CHANNEL = Channel(NAME, install, person_field="teams")
