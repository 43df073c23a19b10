"""What every page handler reaches through the application: the engine, the link signer, the
session keeper and the template environment, held in one ``PageContext`` (``app[PAGES]``), which
the console installs (``bot.console.install``) and the approval page reads too."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web

from bot.console.security import Sessions
from engine.assembly import Engine
from engine.services.links import ApprovalLinks


@dataclass
class PageContext:
    engine: Engine
    links: ApprovalLinks
    sessions: Sessions
    # Set when the server shuts down: live streams end instead of holding the shutdown up.
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    poll_seconds: float = 0.25  # how often a live page looks for what changed
    # How long a live page's stream lasts before the browser reconnects and is checked again
    # (``bot.console.streams``).
    stream_seconds: float = 300.0

    @property
    def public_url(self) -> str:
        return self.engine.config.server.public_url


PAGES = web.AppKey("signoff_pages", PageContext)


def page_context(request: web.Request) -> PageContext:
    return request.app[PAGES]
