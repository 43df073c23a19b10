"""The server's own pages, server-rendered with jinja2 on the API's aiohttp application, and what
every page shares (the web channel's approval page, ``bot.web``, among them):

* ``/console``: the operator console, its live queue of approvals (``inbox``), runs and live
  run timelines (``console``, ``events``; ``streams`` for what the live pages share), who is
  away with a delegate (``away``), behind an API-token sign-in (``login``, ``security``);
* ``/static/``: one stylesheet, the pages' small scripts and the icon; ``/favicon.ico``,
  ``/privacy``, ``/terms`` and the 404 page in the site's layout (``site``);
* the page context (``context``: ``app[PAGES]``), the template environment (``pages``) and the
  signed approval links (``app[LINKS]``) that the approval page and other channels' messages use.

The console is not a channel: the app factory (``bot.app``) installs it before the channels, so
the context and the links are there when they install.

Pages are readable without JavaScript (only their live parts and the countdown use it: a
reload shows the same), work on a phone-sized screen and load nothing from elsewhere.
"""

from __future__ import annotations

import logging

from aiohttp import web

from bot.console import away, console, events, inbox, login, site
from bot.console.context import PAGES, PageContext
from bot.console.security import Sessions
from bot.keys import LINKS
from engine.assembly import Engine
from engine.services.links import ApprovalLinks, Signer

log = logging.getLogger(__name__)


def install(app: web.Application, engine: Engine) -> None:
    """Mount the console, the site's pages and static files on ``app``; share the page context
    (``app[PAGES]``) and the signed links (``app[LINKS]``)."""
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
        config=lambda: engine.config,  # the people in force now (``Engine.reload``)
    )
    ctx = PageContext(engine, links, sessions)
    app[PAGES] = ctx
    app[LINKS] = links
    for table in (
        console.routes,
        inbox.routes,
        away.routes,
        events.routes,
        login.routes,
        site.routes,
    ):
        app.router.add_routes(table)
    app.middlewares.append(site.not_found_pages)  # innermost: sees the router's 404

    async def stop_streams(_: web.Application) -> None:
        ctx.closing.set()

    app.on_shutdown.append(stop_streams)
