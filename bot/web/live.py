"""The approval page follows its request: ``GET /approvals/{id}/events`` streams the page's live
parts (``_approval_state``: what the page says, the countdown, the quorum and the card; and
``_approval_history``) as ``replace`` events whenever the request changes, rendered as the page
renders them (``bot.web.approval.state_of``), and ends when the request does: decided elsewhere,
the page says by whom and what, and its buttons go; expired, it says so (``bot.console.streams``
says how a stream paces, beats and ends).

The stream is refused exactly like the page: the same viewer (the signed link in its query, the
same query as the page's, or the console session) and the same rule of who may see the request;
a viewer the page would show only that the request exists gets no stream (401 without anyone
signed in, 403 otherwise). One stream per page; it closes when the request ends. The page's
``seen`` (``bot.web.approval.events_url``) says what it shows, so its stream sends only changes.
"""

from __future__ import annotations

from aiohttp import web

from bot.console.context import page_context
from bot.console.pages import fragment
from bot.console.streams import EventStream, new_response, stream
from bot.web.approval import is_live, state_of, version_of, viewer_of
from engine.domain.errors import Forbidden, NotFound
from engine.domain.model import TakeoverRequest

routes = web.RouteTableDef()


@routes.get("/approvals/{id}/events")
async def approval_events(request: web.Request) -> web.StreamResponse:
    ctx = page_context(request)
    engine = ctx.engine
    request_id = request.match_info["id"]
    try:
        viewer = await viewer_of(ctx, request, request_id)
        takeover = await engine.queries.get_takeover(request_id)
    except Forbidden as exc:
        return web.Response(status=403, text=exc.message)
    except NotFound as exc:
        return web.Response(status=404, text=exc.message)
    if not engine.approvals.may_see(takeover, viewer.principal):
        if viewer.principal is None:
            return web.Response(status=401, text="sign in, or open your approval link, first")
        return web.Response(status=403, text="you may not see this request")
    response = new_response()
    ctx.sessions.csrf_token(request)  # the card's forms carry this browser's token ...
    ctx.sessions.set_csrf_cookie(request, response)  # ... and a new browser gets its cookie

    async def follow(out: EventStream) -> None:
        nonlocal viewer, takeover
        shown: TakeoverRequest | None = None
        if request.query.get("seen") == version_of(takeover, viewer):
            shown = takeover  # the page shows it already
        while True:
            now = engine.clock.now()
            live = is_live(takeover, now)
            if takeover != shown or not live:
                if takeover != shown and viewer.link is not None:
                    viewer = await viewer_of(ctx, request, request_id)  # the link's use
                shown = takeover
                state = await state_of(request, takeover, viewer, now)
                await out.replace("approval-state", fragment("_approval_state.html.j2", **state))
                await out.replace("history", fragment("_approval_history.html.j2", **state))
            if not live:
                await out.send("end", state["v"].status.value)
                return
            if not await out.pause():
                return
            takeover = await engine.queries.get_takeover(request_id)

    return await stream(request, follow, response=response)
