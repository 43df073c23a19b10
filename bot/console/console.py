"""The operator console: the runs, a run's timeline and the demo button (the queue of pending
approvals is ``bot.console.inbox``).

Every console page needs a session (``bot.console.security``); without one it sends the browser to
the sign-in page and back. The run page is readable without JavaScript; its script only appends
what the live stream (``bot.console.events``) sends.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from aiohttp import web

from bot.api.routing import Handler
from bot.console.context import PageContext, page_context
from bot.console.demo import start_demo
from bot.console.login import login_url
from bot.console.outcome import open_requests, run_outcome
from bot.console.pages import page, redirect, render
from bot.console.security import CSRF_FIELD
from engine.domain.errors import InvalidRequest
from engine.domain.model import TERMINAL_RUN_STATUSES, RunStatus
from engine.domain.timeline import TimelineReader

routes = web.RouteTableDef()


def console_page(handler: Handler) -> Handler:
    """A page for signed-in approvers and admins (others are sent to sign in first)."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        if await page_context(request).sessions.principal(request) is None:
            return redirect(login_url(request.path_qs if request.method == "GET" else "/console"))
        return await handler(request)

    return page(wrapped)


def choice(request: web.Request, name: str) -> str | None:
    """A filter's value from the query string; None when absent or blank."""
    return request.query.get(name, "").strip() or None


@routes.get("/")
async def home(request: web.Request) -> web.StreamResponse:
    return redirect("/console")


@routes.get("/console/runs")
@console_page
async def runs(request: web.Request) -> web.StreamResponse:
    engine = page_context(request).engine
    status_raw = choice(request, "status")
    try:
        status = RunStatus(status_raw) if status_raw else None
    except ValueError:
        raise InvalidRequest(f"unknown run status {status_raw!r}") from None
    workflow = choice(request, "workflow")
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


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
