"""The console's queue, live: the pending approvals the signed-in person may decide (their
inbox, ``engine.domain.approvers.waits_for``), or every pending approval with ``show=all``, a
switch any signed-in approver or admin has (as the queue always showed them all), narrowed by
workflow, channel and approver, oldest first, a page at a time.

``GET /console`` is the page; ``GET /console/queue/events`` (the page's own query string) streams
its ``#queue`` part again whenever it changes (``bot.console.streams``), rendered by the same
template: requests appear, change and leave without a reload. Without JavaScript, a reload shows
the same.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aiohttp import web
from yarl import URL

from bot.console.console import choice, console_page
from bot.console.context import PageContext, page_context
from bot.console.demo import DEMO_WORKFLOW, has_demo
from bot.console.pages import fragment, render
from bot.console.streams import EventStream, stream
from cards.view import build_view
from engine.config.channels import CHANNEL_ADDRESSES
from engine.domain.errors import SignoffError
from engine.domain.inbox import waits_for
from engine.domain.model import Principal
from engine.domain.timeline import minutes_text
from engine.services.approval_queue import QueueFilter

routes = web.RouteTableDef()
QUEUE = URL("/console")  # the page, also in the links its stream sends
CONSOLE_PAGE = 100
EVERYONE = "all"  # ?show=all: every pending request, not only the viewer's
# The addresses with no target (the approval page): every request has them, so the queue's
# channel filter always offers them, whatever the requests shown list.
_EVERY_REQUEST = frozenset(a.name for a in CHANNEL_ADDRESSES if a.target is None)


async def queue_part(ctx: PageContext, request: web.Request, who: Principal) -> dict[str, Any]:
    """What ``_queue.html.j2`` shows for this query and viewer (the page and its stream)."""
    engine = ctx.engine
    everyone = choice(request, "show") == EVERYONE
    where = QueueFilter(choice(request, "workflow"), choice(request, "channel"),
                        choice(request, "approver"))  # fmt: skip
    # The store narrows the viewer's inbox to requests naming them (or no one); the rule of
    # who decides then keeps those that wait for them. Pages follow the store's cursor.
    asked = where if everyone or where.approver else _naming(where, who.person)
    found = await engine.queries.approval_queue(
        asked, limit=CONSOLE_PAGE, cursor=choice(request, "cursor")
    )
    entries = [e for e in found.entries if everyone or waits_for(engine.config, e.request, who)]
    now = engine.clock.now()
    rows = [
        (e, build_view(e.request, e.run, approval_url=None, run_url=None, now=now),
         _age(now, e.request.created_at))
        for e in entries
    ]  # fmt: skip
    return {
        "rows": rows,
        "where": where,
        "everyone": everyone,
        "next_page": _next_page(request, found.next_cursor),
        "channels": sorted({c for e in entries for c in e.request.channels} | _EVERY_REQUEST),
    }


def _naming(where: QueueFilter, person: str | None) -> QueueFilter:
    return QueueFilter(where.workflow, where.channel, person)


@routes.get("/console")
@console_page
async def queue(request: web.Request) -> web.StreamResponse:
    ctx = page_context(request)
    engine = ctx.engine
    who = await ctx.sessions.principal(request)
    assert who is not None  # console_page
    part = await queue_part(ctx, request, who)
    return await render(
        request,
        "queue.html.j2",
        **part,
        events_url=str(URL("/console/queue/events").with_query(request.query)),
        mine_url=_switch(request, everyone=False),
        all_url=_switch(request, everyone=True),
        workflows=sorted(await engine.workflows.all()),
        people=sorted(engine.config.people),
        demo=has_demo(engine.config),
        demo_workflow=DEMO_WORKFLOW,
    )


@routes.get("/console/queue/events")
async def queue_events(request: web.Request) -> web.StreamResponse:
    ctx = page_context(request)
    who = await ctx.sessions.principal(request)
    if who is None:
        return web.Response(status=401, text="sign in to the console first")
    try:
        part = await queue_part(ctx, request, who)
    except SignoffError as exc:
        return web.Response(status=400, text=exc.message)

    async def follow(out: EventStream) -> None:
        nonlocal part
        while True:
            await out.replace("queue", fragment("_queue.html.j2", **part))
            if not await out.pause():
                return
            part = await queue_part(ctx, request, who)

    return await stream(request, follow)


def _switch(request: web.Request, *, everyone: bool) -> str:
    """The queue with the same filters, showing the viewer's inbox or every request."""
    query = {k: v for k, v in request.query.items() if k not in ("show", "cursor") and v}
    if everyone:
        query["show"] = EVERYONE
    return str(QUEUE.with_query(query))


def _next_page(request: web.Request, cursor: str | None) -> str | None:
    """The queue's next page, with the same filters."""
    if cursor is None:
        return None
    query = {k: v for k, v in request.query.items() if k != "cursor" and v}
    return str(QUEUE.with_query({**query, "cursor": cursor}))


def _age(now: datetime, since: datetime) -> str:
    return minutes_text(int((now - since).total_seconds() // 60))
