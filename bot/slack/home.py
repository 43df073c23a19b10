"""The Slack Home tab: each person's pending approvals and recent decisions, kept current.

Published (``views.publish``, rendered by ``cards.slack.home``):

* when the person opens it (``app_home_opened``, tab ``home``);
* when a request they may decide, or decided, changes anywhere: the Slack sink calls
  ``request_changed`` after it delivered the request's card or card update (``bot.slack.sink``:
  the outbox queues one in the transaction of every new request, decision and expiry of a
  request with a Slack address), and this tab republishes for each person concerned;
* after a click on the tab itself (a decision, a refusal to tell, "More", "Newer").

Never inside a request handler: ``refresh`` only queues, and a background task (``Background``)
publishes after the acknowledgement. Publishes for one member are coalesced (one runs at a
time, and any number of changes meanwhile make one more), each shows the state read when it
runs, at most ``PUBLISHING`` tabs are built at once, and a ``Retry-After`` from Slack
(``views.publish`` is Tier 4, 100 a minute) is waited out before the next. A publish lost to a
crash is repaired by the next change or opening.

Who may decide a request is the engine's rule (``Approvals.awaits``, the one ``/signoff
pending`` uses), applied to what the approvers' queue (``engine.queries.approval_queue``)
returns. Buttons are the card's own (``bot.slack.actions``), so a click on the Home tab decides
exactly like one on the card.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError

from bot.slack.api import SlackApi, error_code, retry_after_seconds
from bot.slack.background import Background
from bot.slack.click import Click
from bot.slack.people import LookupUnavailable, SlackPeople
from bot.slack.render import SlackMessages
from cards.render import CardTooLarge
from cards.slack.home import PAGE_SIZE, RECENT, HomePage, render_arguments_view, render_slack_home
from engine.assembly import Engine
from engine.domain.errors import NotFound, SignoffError
from engine.domain.model import Principal, TakeoverRequest, TakeoverStatus
from engine.services.approval_queue import MAX_PAGE, QueueFilter

log = logging.getLogger(__name__)

MAX_PENDING = 1000  # requests read for one Home tab (50 pages): beyond, the console's queue
MAX_WAIT_SECONDS = 60.0  # the longest Retry-After waited for; longer: the next change repairs
MAX_LIMITED = 3  # publishes of one tab in a row refused by the rate limit before giving up
MAX_OPENED = 10_000  # members remembered (opened their tab, asked for a page): this process
PUBLISHING = 4  # tabs read, rendered and published at once (a big group's change queues)
DECIDED = (TakeoverStatus.RELEASED, TakeoverStatus.DENIED)  # taken over: still to release
LOOKUP_FAILED = "Signoff couldn't ask Slack who you are just now. Open this tab again in a minute."


class HomeTabs:
    """Every member's Home tab (module docstring)."""

    def __init__(
        self, engine: Engine, api: SlackApi, background: Background, people: SlackPeople
    ) -> None:
        self.engine = engine
        self.api = api
        self.background = background
        self.people = people
        self.messages = SlackMessages(engine, people)
        self._pages: dict[str, int] = {}  # member -> the page they asked for (this process)
        self._queued: dict[str, str | None] = {}  # member -> notice of their next publish
        self._busy: set[str] = set()  # members with a publishing task
        self._blocked_until = 0.0  # loop time Slack said views.publish may go again
        self._opened: dict[str, None] = {}  # members who opened their tab here, oldest first
        self._slots = asyncio.Semaphore(PUBLISHING)  # tabs built and published at once

    def register(self, app: AsyncApp) -> None:
        app.event("app_home_opened")(self.opened)
        app.event("user_change")(self.user_changed)
        app.action("signoff_home_page")(self.page_clicked)
        app.action("signoff_home_arguments")(self.arguments_clicked)

    # -- events and clicks ---------------------------------------------------------------------

    async def opened(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        """``app_home_opened`` (also sent for the Messages tab, which has nothing to publish)."""
        user = str(event.get("user") or "")
        user_id = self.api.member(body.get("team_id"), user) if user else ""
        if event.get("tab") == "home" and user_id:
            _remember(self._opened, user_id, None)
            self.refresh(user_id)

    async def user_changed(self, event: dict[str, Any]) -> None:
        """A member's profile changed (their email, maybe): forget what was looked up."""
        user = event.get("user")
        if isinstance(user, dict):
            self.people.forget(user)

    async def page_clicked(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        click = Click.of(body)
        if click.value.isdigit() and len(click.value) <= 3:
            member = self.api.member(click.team_id, click.user_id)
            _remember(self._pages, member, int(click.value))
            self.refresh(member)

    async def arguments_clicked(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        self.background.spawn(self._open_arguments(Click.of(body)), "home-arguments")

    # -- publishing ----------------------------------------------------------------------------

    def refresh(self, user_id: str, notice: str | None = None) -> None:
        """Publish ``user_id``'s Home tab again soon, with ``notice`` on top if given."""
        if not user_id:
            return
        if notice is not None or user_id not in self._queued:
            self._queued[user_id] = notice if notice is not None else self._queued.get(user_id)
        if user_id not in self._busy:
            self._busy.add(user_id)
            self.background.spawn(self._publish_queued(user_id), "home")

    def changed(self, request_id: str) -> None:
        """The sink's hook (``SlackSink.on_change``): ``request_changed`` in the background, so
        the outbox's delivery does not wait for lookups and publishes."""
        self.background.spawn(self.request_changed(request_id), "home-change")

    async def request_changed(self, request_id: str) -> None:
        """A request changed (posted, decided, expired): republish its people's Home tabs."""
        try:
            request = await self.engine.queries.get_takeover(request_id)
        except SignoffError as exc:
            log.warning("Home tabs of %s not republished: %s", request_id, exc)
            return
        if not request.approvers:  # anyone may decide it: the tabs opened here, not everyone's
            for opened in list(self._opened):
                self.refresh(opened)
        for person in self._concerned(request):
            try:
                user_id = await self.people.slack_id(person)
            except LookupUnavailable as exc:
                log.warning("no Slack id for %s now (%s): Home tab not republished", person, exc)
                continue
            if user_id is not None:
                self.refresh(user_id)

    def _concerned(self, request: TakeoverRequest) -> list[str]:
        """Whose Home tab shows ``request``: its approvers and whoever decided it."""
        people = self.engine.config.people
        named = (*request.approvers, *_deciders(request))
        return [p for p in dict.fromkeys(named) if p is not None and p in people]

    async def _publish_queued(self, user_id: str) -> None:
        limited = 0
        try:
            while user_id in self._queued:
                notice = self._queued.pop(user_id)
                wait = self._blocked_until - asyncio.get_running_loop().time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if await self._publish(user_id, notice):
                    limited = 0
                elif (limited := limited + 1) < MAX_LIMITED and user_id not in self._queued:
                    self._queued[user_id] = notice  # rate limited: again, after the wait
        finally:
            self._busy.discard(user_id)

    async def _publish(self, user_id: str, notice: str | None) -> bool:
        """One ``views.publish``; False when Slack asked to wait (and it is worth waiting)."""
        try:
            async with self._slots:
                page = await self.page(user_id, notice)
                view = await asyncio.to_thread(render_slack_home, page)
                await self.api.publish_home(user_id, view)
        except SlackApiError as exc:
            wait = retry_after_seconds(exc)
            if wait is not None and wait <= MAX_WAIT_SECONDS:
                self._blocked_until = asyncio.get_running_loop().time() + wait
                return False
            log.warning("Home tab of %s not published: Slack answered %s", user_id, error_code(exc))
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("Home tab of %s not published: %s", user_id, type(exc).__name__)
        except LookupUnavailable as exc:
            log.warning("Home tab of %s not published: lookup failed (%s)", user_id, exc)
        except (SignoffError, CardTooLarge) as exc:
            log.warning("Home tab of %s not published: %s", user_id, exc)
        return True

    async def page(self, user_id: str, notice: str | None = None) -> HomePage:
        """What ``user_id``'s Home tab shows now."""
        person = await self.people.person_for(user_id)
        if person is None:
            return HomePage(user_id, linked=False, notice=notice)
        who = self.engine.principal_for_person(person.name)
        pending = await self._pending(person.name, who)
        pages = max(1, -(-len(pending) // PAGE_SIZE))
        number = min(self._pages.get(user_id, 0), pages - 1)
        shown = pending[number * PAGE_SIZE : (number + 1) * PAGE_SIZE]
        recent = await self._recent(person.name)
        return HomePage(
            user_id,
            linked=True,
            pending=tuple([await self.messages.view(r, run) for r, run in shown]),
            total=len(pending),
            page=number,
            recent=tuple([await self.messages.view(r) for r in recent]),
            notice=notice,
        )

    async def _pending(self, person: str, who: Principal) -> list[Any]:
        """What waits for ``who``, with runs: the runs they took over (to release), then the
        requests they may decide now (the engine's rule), each newest first."""
        taken = QueueFilter(approver=person, status=TakeoverStatus.GRANTED, newest_first=True)
        queue = await self.engine.queries.approval_queue(taken, limit=MAX_PAGE, cursor=None)
        found: list[Any] = [
            (e.request, e.run)
            for e in queue.entries
            if e.request.decided_by == person
            and self.engine.approvals.release_refusal(e.request, who) is None
        ]
        inbox = await self.engine.approvals.inbox(who, limit=MAX_PENDING, newest_first=True)
        found += [(e.request, e.run) for e in inbox.entries]
        return found[:MAX_PENDING]

    async def _recent(self, person: str) -> list[TakeoverRequest]:
        """``person``'s latest decisions: requests they approved, denied or released (one
        taken over and not released yet is still in their list), newest decision first."""
        mine: list[TakeoverRequest] = []
        for status in DECIDED:
            where = QueueFilter(approver=person, status=status, newest_first=True)
            queue = await self.engine.queries.approval_queue(where, limit=4 * RECENT, cursor=None)
            mine += [e.request for e in queue.entries if person in _deciders(e.request)]
        mine.sort(key=lambda r: r.released_at or r.decided_at or r.created_at, reverse=True)
        return mine[:RECENT]

    # -- "Show arguments" ----------------------------------------------------------------------

    async def _open_arguments(self, click: Click) -> None:
        """The dialog with a request's exact arguments, for someone who may see them."""
        member = self.api.member(click.team_id, click.user_id)
        try:
            person = await self.people.person_for(member)
        except LookupUnavailable:
            self.refresh(member, LOOKUP_FAILED)
            return
        who = self.engine.principal_for_person(person.name) if person is not None else None
        try:
            request = await self.engine.queries.get_takeover(click.value)
        except NotFound:
            self.refresh(member, "That request no longer exists.")
            return
        except SignoffError:
            self.refresh(member, "Signoff couldn't read that request just now.")
            return
        if not self.engine.approvals.may_see(request, who):
            self.refresh(member, "Only the request's approvers may see its arguments.")
            return
        try:
            dialog = await asyncio.to_thread(
                render_arguments_view, await self.messages.view(request)
            )
            if not click.trigger_id:
                raise ValueError("the click carried no trigger_id")
            await self.api.open_view(click.trigger_id, dialog, team=click.workspace)
        except SlackApiError as exc:
            why = error_code(exc)
        except (aiohttp.ClientError, TimeoutError, ValueError, CardTooLarge) as exc:
            why = type(exc).__name__
        else:
            return
        log.warning("the arguments dialog of %s did not open: %s", request.id, why)
        self.refresh(
            member,
            "Slack didn't open the arguments in time. Click Show arguments again, or open "
            "the approval page.",
        )


def _deciders(request: TakeoverRequest) -> tuple[str | None, ...]:
    """Who decided ``request``, in part or whole: its decider, releaser and voters."""
    return (request.decided_by, request.released_by, *(v.person for v in request.votes))


def _remember(table: dict[str, Any], key: str, value: Any) -> None:
    """``table[key] = value`` as the newest entry, the oldest dropped beyond ``MAX_OPENED``."""
    table.pop(key, None)
    table[key] = value
    while len(table) > MAX_OPENED:
        del table[next(iter(table))]
