"""The webhook channel: ``webhook:<name>`` in ``channels:`` posts each card, card update and
notice as signed JSON to the URL ``webhooks.<name>`` configures (``bot.webhook.sink``). The
body carries the cards' approval view and the signed decision links of the approval page
(``app[LINKS]``), which the console (``bot.console``) shares before any channel installs
(``bot.app``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.api.views import approval_url
from bot.keys import LINKS
from bot.plugin import Channel
from bot.webhook.sink import WebhookSink
from cards.json_view import view_json
from cards.view import build_view
from engine.assembly import Engine
from engine.domain.model import Run, TakeoverRequest
from engine.ports.sink import Sink
from engine.services.links import ApprovalLinks

NAME = "webhook"


def install(app: web.Application, engine: Engine) -> None:
    """Register the outbox sink (unless the engine was given one)."""
    if NAME not in engine.dispatcher.sinks:
        engine.add_sink(NAME, _webhook_sink(engine, app[LINKS]))


def _webhook_sink(engine: Engine, links: ApprovalLinks) -> Sink:
    public_url = engine.config.server.public_url

    def approval_json(request: TakeoverRequest, run: Run | None) -> dict[str, Any]:
        view = build_view(
            request,
            run,
            approval_url=approval_url(public_url, request.id),
            run_url=f"{public_url}/console/runs/{request.run_id}",
            now=engine.clock.now(),
            admins=bool(engine.config.admins),
        )
        return view_json(view)

    return WebhookSink(
        engine.config.webhooks,
        engine.store,
        engine.clock,
        view_json=approval_json,
        links=links.urls,
        proxies=engine.config.proxies,
    )


CHANNEL = Channel(NAME, install)
