"""The run page's live timeline: journal entries as Server-Sent Events while the run moves.

``GET /console/runs/{id}/events?after=<seq>`` (or the browser's ``Last-Event-ID`` when it
reconnects) sends every entry after ``seq`` as an ``item`` event, an HTML fragment rendered by
the same template as the page (so escaping happens here, once, and the script only appends it),
then polls the store every ``PageContext.poll_seconds`` for more. A ``status`` event carries the
run's status when it changes, and ``replace`` events the page's status badge (with the outcome
of its approvals once it has ended) and its "Waiting for" section whenever they change (a
fragment whose root element's id says which element it replaces); when the run has ended, an
``end`` event and the stream closes (a browser would otherwise reconnect). Polling keeps the
stream right on every replica, whichever worker moves the run; a comment every 15 s keeps
proxies from closing an idle stream.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from bot.console.context import PageContext, page_context
from bot.console.outcome import open_requests, run_outcome
from bot.console.pages import fragment
from engine.domain.errors import NotFound
from engine.domain.model import TERMINAL_RUN_STATUSES, Run
from engine.domain.timeline import TimelineReader

routes = web.RouteTableDef()
HEARTBEAT_SECONDS = 15.0


def _after(request: web.Request) -> int:
    raw = request.headers.get("Last-Event-ID") or request.query.get("after") or "0"
    # ASCII digits that fit a journal seq: int() refuses more than 4,300 digits (a 500).
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else 0


def event_text(event: str, data: str, event_id: int | None = None) -> bytes:
    """One SSE event; a multi-line ``data`` is sent as several ``data:`` lines."""
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    text = data.replace("\r\n", "\n").replace("\r", "\n")
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


async def _closing(ctx: PageContext, seconds: float) -> bool:
    try:
        await asyncio.wait_for(ctx.closing.wait(), seconds)
    except TimeoutError:
        return False
    return True


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
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
        }
    )
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    sent_status = None
    sent: dict[str, str] = {}  # element id -> the fragment last sent for it
    beat = loop.time()
    try:
        while True:
            items = reader.read(entries)
            for item in items:
                html = fragment("_timeline_item.html.j2", i=item)
                await response.write(event_text("item", html, item.seq))
            changed = run.status != sent_status
            if changed or any(i.event.value.startswith("takeover_") for i in items):
                for element, html in (await _facts(ctx, run)).items():
                    if sent.get(element) != html:
                        sent[element] = html
                        await response.write(event_text("replace", html))
            if changed:
                sent_status = run.status
                await response.write(event_text("status", run.status.value))
            if run.status in TERMINAL_RUN_STATUSES:
                await response.write(event_text("end", run.status.value))
                break
            if loop.time() - beat >= HEARTBEAT_SECONDS:
                beat = loop.time()
                await response.write(b": keep-alive\n\n")
            if await _closing(ctx, ctx.poll_seconds):
                break
            run, entries = await store.run_with_entries_after(run.id, reader.last_seq)
    except ConnectionResetError:
        pass  # the browser went away
    return response
