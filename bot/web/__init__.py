"""The web front end, server-rendered with jinja2 on the API's aiohttp application:

* ``/approvals/{id}``: the approval page at every request's ``approvalUrl`` (``approval``);
* ``/console``: the operator console, queue, runs and live run timelines (``console``,
  ``events``), behind an API-token sign-in (``login``, ``security``);
* ``/static/``: one stylesheet, the pages' small scripts and the icon; ``/favicon.ico``,
  ``/privacy``, ``/terms`` and the 404 page in the site's layout (``site``);
* the ``webhook:<name>`` channel's outbox sink (``engine.adapters.webhooks``, built by
  ``engine.assembly``), which needs the cards' approval view and the signed links that live here.

Pages are readable without JavaScript (only the live timeline uses it), work on a phone-sized
screen and load nothing from elsewhere.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.api.views import approval_url
from bot.web import approval, console, events, login, site
from bot.web.context import WEB, WebContext
from bot.web.security import Sessions
from cards.json_view import view_json
from cards.view import build_view
from engine.assembly import Engine, build_webhook_sink
from engine.domain.model import Run, TakeoverRequest
from engine.services.delivery import Sink
from engine.services.links import ApprovalLinks, Signer

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"


def install(app: web.Application, engine: Engine) -> None:
    """Mount the pages and static files on ``app`` and register the webhook sink."""
    server = engine.config.server
    signer = Signer(server.secret_key)
    if signer.ephemeral:
        log.warning(
            "server.secretKey is empty: approval links and console sessions are signed with a "
            "random key of this process, so they stop working when it restarts, and signoff "
            "demo cannot sign links (set SIGNOFF_SECRET_KEY)"
        )
    links = ApprovalLinks(engine, signer)
    sessions = Sessions(
        signer,
        engine.tokens,
        engine.clock,
        secure=server.public_url.startswith("https://"),
        config=engine.config,
    )
    ctx = WebContext(engine, links, sessions)
    app[WEB] = ctx
    for table in (approval.routes, console.routes, events.routes, login.routes, site.routes):
        app.router.add_routes(table)
    app.middlewares.append(site.not_found_pages)  # innermost: sees the router's 404
    app.router.add_static("/static/", STATIC_DIR)

    async def stop_streams(_: web.Application) -> None:
        ctx.closing.set()

    app.on_shutdown.append(stop_streams)
    if "webhook" not in engine.dispatcher.sinks:
        engine.add_sink("webhook", _webhook_sink(engine, links))


def _webhook_sink(engine: Engine, links: ApprovalLinks) -> Sink:
    public_url = engine.config.server.public_url

    def approval_json(request: TakeoverRequest, run: Run | None) -> dict[str, Any]:
        view = build_view(
            request,
            run,
            approval_url=approval_url(public_url, request.id),
            run_url=f"{public_url}/console/runs/{request.run_id}",
            now=engine.clock.now(),
        )
        return view_json(view)

    return build_webhook_sink(engine, view_json=approval_json, links=links.urls)
