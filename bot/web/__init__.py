"""The web channel: ``web`` in ``channels:`` is the approval page at every request's
``approvalUrl`` (``approval``), server-rendered with the cards' HTML (``cards.web``), which
follows its request live (``live``).

Every request has the page, so the address needs no delivery (``engine.domain.notify``). The
page runs on what the console installs first (``bot.console``): the page context, its sessions
and the signed approval links.
"""

from __future__ import annotations

from aiohttp import web

from bot.console.context import PAGES
from bot.plugin import Channel
from bot.web import approval, live
from engine.assembly import Engine

NAME = "web"  # in channels: the approval page itself, which needs no delivery


def install(app: web.Application, engine: Engine) -> None:
    """Mount the approval page; it reads the page context the console installed."""
    if PAGES not in app:
        raise RuntimeError("install the console (bot.console.install) before the web channel")
    app.router.add_routes(approval.routes)
    app.router.add_routes(live.routes)


CHANNEL = Channel(NAME, install)
