"""The operator console: the queue of pending approvals, the runs, and a run's timeline.

Every console page needs a session (``bot.console.security``); without one it sends the browser to
the sign-in page and back. The run page is readable without JavaScript; its script only appends
what the live stream (``bot.console.events``) sends.
"""

from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import Any

from aiohttp import web

from bot.api.routing import Handler
from bot.console.context import PageContext, page_context
from bot.console.demo import DEMO_WORKFLOW, has_demo, start_demo
from bot.console.login import login_url
from bot.console.outcome import open_requests, run_outcome
from bot.console.pages import page, redirect, render
from bot.console.security import CSRF_FIELD
from cards.view import build_view
from engine.config.channels import CHANNEL_ADDRESSES
from engine.domain.errors import InvalidRequest
from engine.domain.model import TERMINAL_RUN_STATUSES, RunStatus
from engine.domain.timeline import TimelineReader, minutes_text
from engine.services.approval_queue import QueueFilter

routes = web.RouteTableDef()
CONSOLE_PAGE = 100
# The addresses with no target (the approval page): every request has them, so the queue's
# channel filter always offers them, whatever the requests shown list.
_EVERY_REQUEST = frozenset(a.name for a in CHANNEL_ADDRESSES if a.target is None)


def console_page(handler: Handler) -> Handler:
    """A page for signed-in approvers and admins (others are sent to sign in first)."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        if await page_context(request).sessions.principal(request) is None:
            return redirect(login_url(request.path_qs if request.method == "GET" else "/console"))
        return await handler(request)

    return page(wrapped)


def _choice(request: web.Request, name: str) -> str | None:
    return request.query.get(name, "").strip() or None


@routes.get("/")
async def home(request: web.Request) -> web.StreamResponse:
    return redirect("/console")


@routes.get("/console")
@console_page
async def queue(request: web.Request) -> web.StreamResponse:
    ctx = page_context(request)
    engine = ctx.engine
    where = QueueFilter(_choice(request, "workflow"), _choice(request, "channel"),
                        _choice(request, "approver"))  # fmt: skip
    # The same reading as GET /v1/approvals, a page at a time.
    found = await engine.queries.approval_queue(
        where, limit=CONSOLE_PAGE, cursor=_choice(request, "cursor")
    )
    entries = found.entries
    now = engine.clock.now()
    rows = [
        (e, build_view(e.request, e.run, approval_url=None, run_url=None, now=now),
         _age(now, e.request.created_at))
        for e in entries
    ]  # fmt: skip
    channels = sorted({c for e in entries for c in e.request.channels} | _EVERY_REQUEST)
    return await render(
        request,
        "queue.html.j2",
        rows=rows,
        where=where,
        workflows=sorted(await engine.workflows.all()),
        people=sorted(engine.config.people),
        channels=channels,
        next_page=_next_page(request, found.next_cursor),
        demo=has_demo(engine.config),
        demo_workflow=DEMO_WORKFLOW,
    )


@routes.get("/console/runs")
@console_page
async def runs(request: web.Request) -> web.StreamResponse:
    engine = page_context(request).engine
    status_raw = _choice(request, "status")
    try:
        status = RunStatus(status_raw) if status_raw else None
    except ValueError:
        raise InvalidRequest(f"unknown run status {status_raw!r}") from None
    workflow = _choice(request, "workflow")
    found = await engine.queries.list_runs(status=status, workflow=workflow, limit=200)
    ended = [r.id for r in found if r.status in TERMINAL_RUN_STATUSES]
    requests = await engine.queries.takeovers_of_runs(ended)
    return await render(
        request,
        "runs.html.j2",
        runs=found,
        outcomes={r.id: run_outcome(r, requests.get(r.id, [])) for r in found},
        chosen_status=status,
        workflow=workflow,
        statuses=[s.value for s in RunStatus],
        workflows=sorted(await engine.workflows.all()),
    )


@routes.get("/console/runs/{id}")
@console_page
async def run_page(request: web.Request) -> web.StreamResponse:
    ctx = page_context(request)
    store = ctx.engine.queries
    run, journal = await store.run_and_journal(request.match_info["id"])
    items = TimelineReader().read(journal)
    requests = await store.list_takeovers(run_id=run.id, limit=1000)
    last = journal[-1].seq if journal else 0
    return await render(
        request,
        "run.html.j2",
        run=run,
        outcome=run_outcome(run, requests),
        open_requests=open_requests(requests),
        items=items,
        live=run.status not in TERMINAL_RUN_STATUSES,
        events_url=f"/console/runs/{run.id}/events?after={last}",
        output=_json_text(run.output),
    )


@routes.post("/console/demo")
@console_page
async def demo(request: web.Request) -> web.StreamResponse:
    ctx: PageContext = page_context(request)
    form = await request.post()
    ctx.sessions.check_csrf(request, form.get(CSRF_FIELD))
    run = await start_demo(ctx.engine)
    return redirect(f"/console/runs/{run.id}")


def _next_page(request: web.Request, cursor: str | None) -> str | None:
    """The queue's next page, with the same filters."""
    if cursor is None:
        return None
    query = {k: v for k, v in request.query.items() if k != "cursor" and v}
    return str(request.rel_url.with_query({**query, "cursor": cursor}))


def _age(now: datetime, since: datetime) -> str:
    return minutes_text(int((now - since).total_seconds() // 60))


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
