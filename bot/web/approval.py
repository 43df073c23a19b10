"""The approval page at ``approvalUrl``: the request as the cards show it, and its decision.

Who may decide here, in order:

* a signed link (``?p=&exp=&sig=``, ``engine.services.links``): its person, once, until the request
  expires; the only identity that needs no sign-in, which is why chat and webhooks carry it;
* a console session (``bot.console.security``): the signed-in approver or admin;
* nobody: the page says only that a request exists, with a way to sign in that comes back here.

What it asks (summary, arguments, reason, approvers, history) is shown only to those who may see
the request (``engine.domain.approvers.may_see``: its approvers, admins, the run's starter),
through their link or session; anyone else, a chat's link preview or a mail scanner among them,
gets the page without it. A GET never decides.

What happened is always shown as a page, never an error: a used link says how it was used, a
decided request who decided and when. A request that expired answers 410 with that page (its
link died with it). Every form carries a CSRF token (403 without). An open page follows its
request (``bot.web.live``): ``state_of`` renders its live parts for the page and the stream.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from aiohttp import web
from markupsafe import Markup

from bot import replies
from bot.api.errors import status_for
from bot.api.views import approval_url
from bot.console.context import PageContext, page_context
from bot.console.login import login_url
from bot.console.pages import page, redirect, render
from bot.console.security import CSRF_FIELD
from bot.replies import Refusal
from cards.templating import plain_date, words
from cards.view import build_view, override_warning
from cards.web.render import render_web_card
from engine.domain.approvers import override_of
from engine.domain.errors import SignoffError, Unauthorized
from engine.domain.expiry import status_at
from engine.domain.model import Principal, TakeoverRequest, TakeoverStatus
from engine.domain.timeline import TimelineReader, minutes_text
from engine.services.links import ApprovalLink, LinkUse

routes = web.RouteTableDef()
# The colour of what a request that ended says (in the card's words, ``words.j2`` STATE).
_TONE = {TakeoverStatus.RELEASED: "ok", TakeoverStatus.DENIED: "bad",
         TakeoverStatus.CANCELLED: "bad", TakeoverStatus.EXPIRED: "bad"}  # fmt: skip


@dataclass(frozen=True)
class Viewer:
    """Who is looking at the page, and through what."""

    principal: Principal | None
    link: ApprovalLink | None = None
    use: LinkUse | None = None  # how the link was used, if it was


@dataclass(frozen=True)
class Situation:
    status: int  # the page's HTTP status
    note: str | None  # what to tell the viewer, above the card
    tone: str  # "info" | "ok" | "bad"
    can_act: bool  # show the card's buttons


def _expired(request: TakeoverRequest, now: datetime) -> bool:
    return status_at(request, now) is TakeoverStatus.EXPIRED


def situation(
    ctx: PageContext, request: TakeoverRequest, viewer: Viewer, now: datetime
) -> Situation:
    """What the viewer may do with the request now, and what the page says about it."""
    who, link, use = viewer.principal, viewer.link, viewer.use
    used = None
    if use:
        did = words("VERB_PAST").get(use.action, use.action)
        used = f"You {did} through this link at {plain_date(use.used_at)}."
    if _expired(request, now):
        return Situation(410, "This request expired before anyone decided it.", "bad", False)
    if request.is_final:
        if used:
            return Situation(200, used, "info", False)
        return Situation(200, decided_note(request, now), _TONE[request.status], False)
    if request.status is TakeoverStatus.GRANTED:
        # The engine's one rule: the person who took it over, or an admin, releases it.
        rule = ctx.engine.approvals
        if who is not None and rule.release_refusal(request, who) is None:
            if request.decided_by in (who.name, who.person):
                return Situation(200, "You took this over: release it when done.", "info", True)
            note = f"Taken over by {request.decided_by}; as an admin, you may release it."
            return Situation(200, note, "info", True)
        waits = "the run waits until they, or an admin, release it."
        note = f"Taken over by {request.decided_by}; {waits}"
        return Situation(200, note, "info", False)
    if used:
        return Situation(200, used, "info", False)
    if link is not None and link.expired(now):
        return Situation(410, "This link has expired.", "bad", False)
    if who is None:
        return Situation(200, "Sign in to decide this request.", "info", False)
    voted = next((v for v in request.votes if v.person == who.person), None)
    if voted is not None:
        note = f"You approved at {plain_date(voted.at)}; waiting for the other approvals."
        return Situation(200, note, "info", False)
    refusal = ctx.engine.approvals.refusal(request, who)
    if refusal is not None:
        return Situation(403 if link else 200, f"{who.name}: {refusal}.", "bad", False)
    # An admin outside the approvers is told, before deciding, that it is an override.
    warning = override_warning(request, override_of(ctx.engine.config, request, who))
    return Situation(200, warning, "info", True)


def decided_note(request: TakeoverRequest, now: datetime) -> str:
    """What happened to a request that ended, in a person's words: "Denied by bob 2 min ago:
    not this month." (the reason or notes last)."""
    said, by, when = words("STATE")[request.status], request.decided_by, request.decided_at
    if request.released_by and request.released_by != request.decided_by:
        said = f"Taken over by {request.decided_by} and released"
        by, when = request.released_by, request.released_at
    note = said + (f" by {by}" if by else "") + (f" {_ago(now, when)}" if when else "")
    return note + (f": {request.notes}" if request.notes else ".")


def _ago(now: datetime, then: datetime) -> str:
    minutes = int((now - then).total_seconds() // 60)
    return "just now" if minutes < 1 else f"{minutes_text(minutes)} ago"


def is_live(request: TakeoverRequest, now: datetime) -> bool:
    """Whether the page follows ``request`` (``bot.web.live``): until it ends or expires."""
    return not request.is_final and not _expired(request, now)


async def viewer_of(ctx: PageContext, request: web.Request, request_id: str) -> Viewer:
    """Who looks, by the page's own rules: the signed link in the query (``Forbidden`` when it
    was altered), else the console session, else nobody."""
    link = ctx.links.parse(request_id, request.query)  # Forbidden for an altered link
    if link is None:
        return Viewer(await ctx.sessions.principal(request))
    who = ctx.engine.principal_for_person(link.person)
    return Viewer(who, link, await ctx.links.use_of(link))


def page_url(request_id: str, link: ApprovalLink | None, *, suffix: str = "") -> str:
    """The page's path (``suffix``: ``/events``, its live stream), with the viewer's link."""
    base = f"/approvals/{quote(request_id, safe='')}{suffix}"
    return f"{base}?{link.query}" if link else base


def events_url(takeover: TakeoverRequest, viewer: Viewer) -> str:
    """The page's live stream, told what the page shows (``seen``) so that it sends only what
    changes after: a card swapped for its own copy as the page opens would take the button
    from under a first click, and the reason's focus with it."""
    url = page_url(takeover.id, viewer.link, suffix="/events")
    return f"{url}{'&' if viewer.link else '?'}seen={version_of(takeover, viewer)}"


def version_of(takeover: TakeoverRequest, viewer: Viewer) -> str:
    """A short digest of what the page's live parts are rendered from (time aside)."""
    return hashlib.blake2b(repr((takeover, viewer.use)).encode(), digest_size=8).hexdigest()


async def state_of(
    request: web.Request, takeover: TakeoverRequest, viewer: Viewer, now: datetime
) -> dict[str, Any]:
    """What the page's live parts show (``_approval_state`` and ``_approval_history``), for the
    page and, when it changes, for its stream: the view, the card, the situation, the history."""
    ctx = page_context(request)
    where = situation(ctx, takeover, viewer, now)
    run, journal = await ctx.engine.queries.run_and_journal(takeover.run_id)
    shown = takeover
    if _expired(takeover, now) and takeover.status is TakeoverStatus.PENDING:
        shown = dataclasses.replace(takeover, status=TakeoverStatus.EXPIRED)  # sweeper is behind
    view = build_view(
        shown, run, approval_url=approval_url(ctx.public_url, takeover.id), run_url=None, now=now
    )
    action = page_url(takeover.id, viewer.link)
    card = render_web_card(
        view,
        csrf_token=ctx.sessions.csrf_token(request) if where.can_act else None,
        form_action=action if where.can_act else None,
    )
    history = [i for i in TimelineReader().read(journal) if i.request_id == takeover.id]
    return {"v": view, "card": Markup(card), "where": where, "history": history}


async def show(
    request: web.Request, request_id: str, *, problem: str | None = None, status: int | None = None
) -> web.Response:
    """The page for ``request_id`` as the viewer sees it; ``problem`` reports a refused POST."""
    ctx = page_context(request)
    engine = ctx.engine
    viewer = await viewer_of(ctx, request, request_id)
    takeover = await engine.queries.get_takeover(request_id)
    now = engine.clock.now()
    where = situation(ctx, takeover, viewer, now)
    if not engine.approvals.may_see(takeover, viewer.principal):
        return await _hidden(request, request_id, viewer, where)
    live = is_live(takeover, now)
    return await render(
        request,
        "approval.html.j2",
        status=status or where.status,
        problem=problem,
        viewer=viewer,
        events_url=events_url(takeover, viewer) if live else None,
        **await state_of(request, takeover, viewer, now),
    )


async def _hidden(
    request: web.Request, request_id: str, viewer: Viewer, where: Situation
) -> web.Response:
    """The page for someone who may not see the request: that it exists, and a way to sign in
    (as someone who may) that comes back here. Its status stays what the request's state says
    (410 once expired); a known person who may not see it gets 403."""
    status = where.status if where.status == 410 or viewer.principal is None else 403
    return await render(
        request,
        "approval_hidden.html.j2",
        status=status,
        viewer=viewer,
        sign_in=login_url(page_url(request_id, None)),
    )


@routes.get("/approvals/{id}")
@page
async def approval_page(request: web.Request) -> web.StreamResponse:
    return await show(request, request.match_info["id"])


@routes.post("/approvals/{id}")
@page
async def decide(request: web.Request) -> web.StreamResponse:
    ctx = page_context(request)
    request_id = request.match_info["id"]
    form = await request.post()
    ctx.sessions.check_csrf(request, form.get(CSRF_FIELD))
    verb = str(form.get("action", ""))
    notes = str(form.get("reason", "")).strip() or None
    link = ctx.links.parse(request_id, request.query)
    try:
        if link is not None:
            await ctx.links.decide(link, verb, notes)
        else:
            who = await ctx.sessions.principal(request)
            if who is None:
                raise Unauthorized("sign in to decide this request")
            await replies.decide(ctx.engine.approvals, request_id, who, verb, notes)
    except SignoffError as exc:
        # A refusal is shown on the page in the engine's words; a missing request is the 404
        # page and an unavailable database the error page.
        if replies.refusal(exc) in (None, Refusal.MISSING, Refusal.UNAVAILABLE):
            raise
        return await show(request, request_id, problem=exc.message, status=status_for(exc))
    return redirect(page_url(request_id, link))
