"""The console's queue, live: the pending approvals the signed-in person may decide (their
inbox, ``Approvals.awaits``), or every pending approval with ``show=all``, a
switch any signed-in approver or admin has (as the queue always showed them all), narrowed by
workflow, channel and approver, oldest first, a page at a time.

``GET /console`` is the page; ``GET /console/queue/events`` (the page's own query string) streams
its ``#queue`` part again whenever it changes (``bot.console.streams``), rendered by the same
template: requests appear, change and leave without a reload. Without JavaScript, a reload shows
the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
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
from engine.domain.model import Principal
from engine.domain.timeline import minutes_text
from engine.services.approval_queue import QueueEntry, QueueFilter

routes = web.RouteTableDef()
QUEUE = URL("/console")  # the page, also in the links its stream sends
CONSOLE_PAGE = 100
EVERYONE = "all"  # ?show=all: every pending request, not only the viewer's
# The addresses with no target (the approval page): every request has them, so the queue's
# channel filter always offers them, whatever the requests shown list.
_EVERY_REQUEST = frozenset(a.name for a in CHANNEL_ADDRESSES if a.target is None)


@dataclass(frozen=True)
class Reading:
    """The queue as read for one viewer and query at ``now``."""

    where: QueueFilter
    everyone: bool  # every pending request, not only the viewer's inbox
    entries: list[QueueEntry]
    next_cursor: str | None
    now: datetime

    @property
    def looks(self) -> tuple[object, ...]:
        """What the rows show changes only with this: the stream renders them again when it
        does, not at every poll."""
        now = self.now
        return (self.next_cursor, *(
            (e.request, e.workflow, _minutes(now - e.request.created_at),
             math.ceil((e.request.expires_at - now).total_seconds() / 60))
            for e in self.entries
        ))  # fmt: skip


async def read_queue(ctx: PageContext, request: web.Request, who: Principal) -> Reading:
    """The queue for this query (its filters, ``show`` and ``cursor``) as ``who`` sees it."""
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
    entries = [e for e in found.entries if everyone or engine.approvals.awaits(e.request, who)]
    return Reading(where, everyone, entries, found.next_cursor, engine.clock.now())


def queue_part(request: web.Request, reading: Reading) -> dict[str, Any]:
    """What ``_queue.html.j2`` shows of ``reading`` (the page and its stream)."""
    now, entries = reading.now, reading.entries
    rows = [
        (e, build_view(e.request, e.run, approval_url=None, run_url=None, now=now),
         minutes_text(_minutes(now - e.request.created_at)))
        for e in entries
    ]  # fmt: skip
    return {
        "rows": rows,
        "where": reading.where,
        "everyone": reading.everyone,
        "next_page": _next_page(request, reading.next_cursor),
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
    part = queue_part(request, await read_queue(ctx, request, who))
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
        reading = await read_queue(ctx, request, who)
    except SignoffError as exc:
        return web.Response(status=400, text=exc.message)

    async def follow(out: EventStream) -> None:
        nonlocal reading
        shown = None
        while True:
            if reading.looks != shown:
                shown = reading.looks
                part = queue_part(request, reading)
                await out.replace("queue", fragment("_queue.html.j2", **part))
            if not await out.pause():
                return
            reading = await read_queue(ctx, request, who)

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


def _minutes(age: timedelta) -> int:
    return int(age.total_seconds() // 60)
