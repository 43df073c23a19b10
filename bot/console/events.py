"""The run page's live timeline: journal entries as Server-Sent Events while the run moves.

``GET /console/runs/{id}/events?after=<seq>`` (or the browser's ``Last-Event-ID`` when it
reconnects) sends every entry after ``seq`` as an ``item`` event, an HTML fragment rendered by
the same template as the page (so escaping happens here, once, and the script only appends it),
then polls the store for more (``bot.console.streams``: the pace, heartbeats, the stream's
lifetime). A ``status`` event carries the run's status when it changes, and ``replace`` events
the page's status badge (with the outcome of its approvals once it has ended) and its "Waiting
for" section whenever they change; when the run has ended, an ``end`` event and the stream
closes.
"""

from __future__ import annotations

from aiohttp import web

from bot.console.context import PageContext, page_context
from bot.console.outcome import open_requests, run_outcome
from bot.console.pages import fragment
from bot.console.streams import EventStream, stream
from engine.domain.errors import NotFound
from engine.domain.model import TERMINAL_RUN_STATUSES, Run
from engine.domain.timeline import TimelineReader

routes = web.RouteTableDef()


def _after(request: web.Request) -> int:
    raw = request.headers.get("Last-Event-ID") or request.query.get("after") or "0"
    # ASCII digits that fit a journal seq: int() refuses more than 4,300 digits (a 500).
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else 0


async def _facts(ctx: PageContext, run: Run) -> dict[str, str]:
    """The status badge and the "Waiting for" section as the page renders them, for a
    ``replace`` event each (the script swaps the element with the same id)."""
    requests = await ctx.engine.queries.list_takeovers(run_id=run.id, limit=1000)
    badge = fragment(
        "_run_status.html.j2", run=run, outcome=run_outcome(run, requests), badge_id="run-status"
    )
    waiting = fragment("_waiting.html.j2", open_requests=open_requests(requests))
    return {"run-status": badge, "waiting": waiting}


@routes.get("/console/runs/{id}/events")
async def run_events(request: web.Request) -> web.StreamResponse:
    ctx = page_context(request)
    if await ctx.sessions.principal(request) is None:
        return web.Response(status=401, text="sign in to the console first")
    store = ctx.engine.queries
    after = _after(request)
    try:
        run, journal = await store.run_and_journal(request.match_info["id"])
    except NotFound as exc:
        return web.Response(status=404, text=exc.message)
    reader = TimelineReader()
    reader.read(e for e in journal if e.seq <= after)  # earlier entries: start times, requests
    entries = [e for e in journal if e.seq > after]

    async def follow(out: EventStream) -> None:
        nonlocal run, entries
        sent_status = None
        while True:
            items = reader.read(entries)
            for item in items:
                await out.send("item", fragment("_timeline_item.html.j2", i=item), item.seq)
            changed = run.status != sent_status
            if changed or any(i.event.value.startswith("takeover_") for i in items):
                for element, html in (await _facts(ctx, run)).items():
                    await out.replace(element, html)
            if changed:
                sent_status = run.status
                await out.send("status", run.status.value)
            if run.status in TERMINAL_RUN_STATUSES:
                await out.send("end", run.status.value)
                return
            if not await out.pause():
                return
            run, entries = await store.run_with_entries_after(run.id, reader.last_seq)

    return await stream(request, follow)
