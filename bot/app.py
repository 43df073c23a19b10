"""The aiohttp application factory: configuration, engine, REST API, the console and the pages
every channel shares (``bot.console``), and every channel in the registry (``bot.channels``;
chat ones when configured), on one server."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

from aiohttp import web

from bot.api import route_tables
from bot.api.auth import auth_middleware
from bot.api.errors import error_middleware
from bot.api.routing import Handler, mount
from bot.channels import install_channels
from bot.console import install as install_console
from bot.hygiene import add_headers, input_middleware
from bot.keys import CONFIG, ENGINE
from bot.metrics import LATENCY, REQUESTS
from engine.assembly import Engine, EngineOptions
from engine.config import AppConfig
from engine.services import crashpoints

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024


@web.middleware
async def metrics_middleware(
    request: web.Request,
    handler: Handler,
) -> web.StreamResponse:
    started = time.perf_counter()
    status = 500
    try:
        response: web.StreamResponse = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        REQUESTS.labels(request.method, str(status)).inc()
        LATENCY.labels(request.method).observe(time.perf_counter() - started)


@web.middleware
async def ack_crash_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The ``ack`` crash point (installed only under ``SIGNOFF_TEST_CRASH_DIR``): a POST has
    been handled, so whatever it decided is committed, and its answer has not left yet."""
    response: web.StreamResponse = await handler(request)
    if request.method == "POST" and response.status < 300:
        crashpoints.reached("ack")
    return response


def create_app(
    config: AppConfig,
    options: EngineOptions | None = None,
    *,
    run_background: bool = True,
) -> web.Application:
    """Build the application. ``run_background=False`` starts no workers or sweeper (for a
    process that only serves requests, and for tests that drive the engine themselves)."""
    crash = [ack_crash_middleware] if crashpoints.ENABLED else []
    app = web.Application(
        middlewares=[
            *crash,
            metrics_middleware,
            error_middleware,
            auth_middleware,
            input_middleware,
        ],
        client_max_size=MAX_BODY_BYTES,
    )
    app.on_response_prepare.append(add_headers)
    engine = Engine(config, options)
    app[CONFIG] = config
    app[ENGINE] = engine
    mount(app, route_tables())
    install_console(app, engine)  # not a channel; its page context and links come first
    install_channels(app, engine)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        if run_background:
            await engine.start()
        log.info("signoff ready (database %s)", engine.db.dialect)
        yield
        await engine.stop()

    app.cleanup_ctx.append(lifecycle)
    return app
