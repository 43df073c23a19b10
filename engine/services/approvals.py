"""Deciding takeover requests: who may, and what each decision does.

Every front end (REST API, Slack buttons, Teams invokes, the web page) calls these methods with
the acting ``Principal``, and so does a signed approval link (``engine.services.links``, with
the link's single use: ``link=``): this is the one place that says how a decision is applied.
Authorization happens here, once, for all of them, by the rules of ``engine.domain.approvers``
(approvers, admin overrides, who may open a takeover). What each decision does is the domain's
(``engine.domain.decisions``): a decision here binds one of its functions with who decides, the
verdict and the time, behind the authorization, and hands it to the store's
``apply_decision``, which reads the request inside its transaction (locking its row on
PostgreSQL), calls it and applies the ``Outcome`` in one guarded write, so double clicks and
races yield exactly one decision. A refusal is raised before anything is written, and no
separate read comes first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.config import AppConfig, parse_config
from engine.domain import decisions, notify
from engine.domain.approvers import (
    decision_refusal,
    may_see,
    override_of,
    release_refusal,
    run_deciders,
    takeover_deciders,
)
from engine.domain.call_workflow import is_call_workflow
from engine.domain.decisions import Outcome
from engine.domain.errors import Forbidden, InvalidRequest, NotFound
from engine.domain.expiry import deadline
from engine.domain.inbox import waits_for
from engine.domain.model import (
    JournalEvent,
    Principal,
    Role,
    Run,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    TimeoutBehavior,
)
from engine.domain.parking import takeover_requested
from engine.domain.records import LinkUse
from engine.domain.replay import parking_step
from engine.ports import Clock, IdSource
from engine.services.approval_queue import Inbox, read_inbox

if TYPE_CHECKING:  # the store's own modules import rules from here
    from engine.domain.records import Adopt
    from engine.ports.store import Decide, Store
    from engine.services.context import WorkflowLookup
    from engine.services.workers import Workers

Override = dict[str, Any] | None
"""What a decision's check returns: extra journal data for an admin override, or None."""

MAX_TIMEOUT_MINUTES = 1440
MAX_NOTES = 4000


class Approvals:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        ids: IdSource,
        *,
        wake: Callable[[], None] = lambda: None,  # runs were queued
        wake_outbox: Callable[[], None] = lambda: None,
        workers: Workers | None = None,
        config: AppConfig | None = None,
        workflows: WorkflowLookup | None = None,  # a run's deciders, a takeover's stepId
    ) -> None:
        self.store = store
        self.clock = clock
        self.ids = ids
        self.wake = wake
        self.wake_outbox = wake_outbox
        self.workers = workers
        self.config = config if config is not None else parse_config("", {})
        self.workflows = workflows  # a run's own deciders (``run_deciders``)

    # -- authorization -------------------------------------------------------------------------

    def refusal(self, request: TakeoverRequest, who: Principal, verb: str = "grant") -> str | None:
        """Why ``who`` may not ``verb`` (grant, takeover, deny, release) ``request``, or None
        when they may (``engine.domain.approvers``: approvers, admins as an override; the taker or
        an admin releases)."""
        return decision_refusal(self.config, request, who, verb)

    def may_see(self, request: TakeoverRequest, who: Principal | None) -> bool:
        """Whether ``who`` may see ``request``'s arguments and reason (``engine.domain.approvers``:
        its approvers, admins, the run's starter)."""
        return may_see(request, who)

    def awaits(self, request: TakeoverRequest, who: Principal) -> bool:
        """Whether ``request`` waits for ``who``'s own decision now: before its deadline and
        ``engine.domain.inbox.waits_for`` (pending, theirs to decide as an approver, not
        approved by them already; an admin's override does not count). The one rule of every
        person's inbox: the console's queue, ``/signoff pending``, the Slack Home tab and the
        Teams personal chat's ``pending``."""
        return request.expires_at > self.clock.now() and waits_for(self.config, request, who)

    async def inbox(self, who: Principal, *, limit: int, newest_first: bool = False) -> Inbox:
        """What waits for ``who``'s decision now (``awaits``), oldest (or newest) first: at most
        ``limit`` requests, with their runs, and whether more wait. The inbox each channel
        shows a person (``/signoff pending``, the Slack Home tab, the Teams personal chat)."""
        return await read_inbox(
            self.store,
            who.person,
            lambda request: self.awaits(request, who),
            limit=limit,
            newest_first=newest_first,
        )

    def release_refusal(self, request: TakeoverRequest, who: Principal) -> str | None:
        """Why ``who`` may not release ``request`` taken over (``engine.domain.approvers``)."""
        return release_refusal(request, who)

    def _authorize(self, request: TakeoverRequest, who: Principal, verb: str = "grant") -> None:
        reason = self.refusal(request, who, verb)
        if reason is not None:
            raise Forbidden(reason, request_id=request.id)

    def _decider(self, request: TakeoverRequest, who: Principal, verb: str) -> Override:
        """Authorize ``who`` and say how they decide: ``{"override": "admin"}`` for an admin
        who is not among the request's approvers (journaled and shown on the card), else
        None."""
        self._authorize(request, who, verb)
        kind = override_of(self.config, request, who)
        return None if kind is None else {"override": kind}

    # -- decisions -----------------------------------------------------------------------------

    async def grant(
        self,
        request_id: str,
        who: Principal,
        *,
        notes: str | None = None,
        sdp_offer: str | None = None,
        release: bool = False,
        run_id: str | None = None,
        link: LinkUse | None = None,
    ) -> TakeoverRequest:
        """``run_id``: the run the caller named with the request (a REST path); a request of
        another run is not found. ``link``: the decision comes through a signed link, and
        this is its use (recorded in the decision's transaction; ``LinkUsed`` when it was)."""
        notes = _notes(notes)
        now = self.clock.now()  # the decision's time is its arrival, not its slot's

        def decide(request: TakeoverRequest) -> Outcome:
            _of_run(request, run_id)
            override = self._decider(request, who, "grant" if release else "takeover")
            return decisions.grant(
                request,
                who.name,
                now,
                notes=notes,
                sdp_offer=sdp_offer,
                release=release,
                override=override,
            )

        offer = await self._offer() if release and link is None else None
        after = await self._apply(request_id, decide, now, offer, link)
        # A vote or a grant without release hands nothing back; its card still changes.
        self._woken(offer, after, handed_back=after.status == TakeoverStatus.RELEASED)
        return after

    async def deny(
        self,
        request_id: str,
        who: Principal,
        *,
        notes: str | None = None,
        run_id: str | None = None,
        link: LinkUse | None = None,
    ) -> TakeoverRequest:
        """``run_id`` and ``link`` as for ``grant``."""
        notes = _notes(notes)
        now = self.clock.now()

        def decide(request: TakeoverRequest) -> Outcome:
            _of_run(request, run_id)
            override = self._decider(request, who, "deny")
            if request.deny_reason_required and not (notes or "").strip():
                raise InvalidRequest("a reason is required to deny this request")
            return decisions.deny(request, who.name, now, notes=notes, override=override)

        return await self._hand_back(request_id, decide, now, link)

    async def release(
        self,
        request_id: str,
        who: Principal,
        *,
        run_id: str | None = None,
        link: LinkUse | None = None,
    ) -> TakeoverRequest:
        """``run_id`` and ``link`` as for ``grant`` (a link releases what it took over)."""
        now = self.clock.now()

        def decide(request: TakeoverRequest) -> Outcome:
            _of_run(request, run_id)
            self._authorize(request, who, "release")
            return decisions.release(request, who.name, now, admin=who.is_admin)

        return await self._hand_back(request_id, decide, now, link)

    async def _hand_back(
        self, request_id: str, decide: Decide, now: datetime, link: LinkUse | None
    ) -> TakeoverRequest:
        """A decision that hands the run back (a denial, a release): offered to a free worker
        slot of this process unless it comes through a link, then the workers woken."""
        offer = await self._offer() if link is None else None
        after = await self._apply(request_id, decide, now, offer, link)
        self._woken(offer, after)
        return after

    async def _apply(
        self,
        request_id: str,
        decide: Decide,
        now: datetime,
        offer: Adopt | None,
        link: LinkUse | None,
    ) -> TakeoverRequest:
        """The store reads the request and applies what ``decide`` makes of it, in one
        transaction; ``decide`` authorizes first, on the request as read."""
        try:
            return await self.store.apply_decision(request_id, decide, now, adopt=offer, link=link)
        finally:
            self._settle(offer)

    # -- handing the run back ------------------------------------------------------------------
    # A decision that puts a parked run back to work claims it for a free worker slot of this
    # process in the same transaction (``Workers.offer_soon``: with all busy, the first to free
    # within 1 s): the run resumes here at once, with no queue round trip. Without a slot
    # it is queued and the workers are woken. A decision through a link is not offered one
    # (it never was): the link's use is its transaction's, and the store's ``with_link_use``
    # does not take back a claim whose commit failed, as its ``grant`` and friends do.

    async def _offer(self) -> Adopt | None:
        return await self.workers.offer_soon() if self.workers is not None else None

    def _settle(self, offer: Adopt | None) -> None:
        if self.workers is not None:
            self.workers.settle(offer)

    def _woken(
        self, offer: Adopt | None, after: TakeoverRequest, *, handed_back: bool = True
    ) -> None:
        if handed_back and (offer is None or offer.run_id is None):
            self.wake()  # the run was queued: a worker claims it
        if notify.card_changed(after):
            self.wake_outbox()  # the card's update goes out now

    async def answer(self, request_id: str, who: Principal, sdp_answer: str) -> TakeoverRequest:
        def decide(request: TakeoverRequest) -> Outcome:
            self._authorize(request, who, "release")  # the taker (or an admin), as releases
            return decisions.answer(request, sdp_answer)

        return await self._apply(request_id, decide, self.clock.now(), None, None)

    async def request(
        self,
        run_id: str,
        who: Principal,
        *,
        reason: str,
        step_id: str | None = None,
        timeout_minutes: int = 30,
        channels: Sequence[str] = (),
        approvers: Sequence[str] = (),
    ) -> TakeoverRequest:
        """An operator takes over a queued or running run: it parks before ``step_id`` (or,
        without one, before the first step not yet started when the request is made) until
        the request is released. Without ``step_id``, the request returned names the step the
        run will park before (None when none is left). A ``step_id`` the run's workflow does
        not have is ``NotFound``; one the run has already started is refused (``Conflict``, by
        the store, in the transaction that would create the request). Only the run's own
        deciders and admins may open it, and ``approvers`` may name only them
        (``takeover_deciders``)."""
        if who.role == Role.AGENT:
            raise Forbidden("agents cannot request a takeover")
        if not 1 <= timeout_minutes <= MAX_TIMEOUT_MINUTES:
            raise InvalidRequest(f"timeoutMinutes must be 1..{MAX_TIMEOUT_MINUTES}")
        run = await self.store.get_run(run_id)
        if step_id is not None:
            await self._check_step(run.workflow, step_id)
        approvers = takeover_deciders(self.config, await self._deciders(run), who, approvers)
        now = self.clock.now()
        request = TakeoverRequest(
            id=self.ids.new_id(),
            run_id=run_id,
            step_id=step_id,
            kind=TakeoverKind.MANUAL,
            status=TakeoverStatus.PENDING,
            reason=reason,
            created_at=now,
            expires_at=deadline(now, timeout_minutes),
            approvers=tuple(approvers),
            allow_self_approval=True,  # the operator asked for it; they may release it
            timeout_behavior=TimeoutBehavior.AUTO_APPROVE,
            channels=tuple(channels),
            requested_by=run.requested_by,
            details={"workflow": run.workflow, "agent": run.agent, "requestedBy": who.name},
        )
        event = takeover_requested(request, delivered=False)
        created = await self.store.request_takeover(request, now, event, outbox=notify.new_card)
        if step_id is not None:
            return created
        return replace(created, step_id=await self._parking_step(run, created.id))

    async def _parking_step(self, run: Run, request_id: str) -> str | None:
        """The step an operator's takeover without one parks ``run`` before, foreseen from the
        journal as it stood when the request was journaled (``parking_step``). The request
        itself keeps "before the first step not yet started", which the interpreter applies."""
        if self.workflows is None:
            return None
        try:
            workflow = await self.workflows.get(run.workflow)
        except NotFound:
            return None
        _, journal = await self.store.run_and_journal(run.id)
        requested_at = next(
            (
                entry.seq
                for entry in journal
                if entry.event == JournalEvent.TAKEOVER_REQUESTED
                and entry.data.get("requestId") == request_id
            ),
            None,
        )
        if requested_at is None:
            return None
        return parking_step(workflow, journal, requested_at)

    async def _check_step(self, workflow_name: str, step_id: str) -> None:
        if self.workflows is None:
            return
        workflow = await self.workflows.get(workflow_name)
        if not any(node.id == step_id for node in workflow.nodes):
            steps = ", ".join(node.id for node in workflow.nodes)
            raise NotFound(
                f"workflow {workflow_name!r} has no step {step_id!r} (its steps: {steps})",
                stepId=step_id,
            )

    async def _deciders(self, run: Run) -> tuple[str, ...] | None:
        """Who decides for ``run``: its workflow's people, or (a held call) its request's."""
        if is_call_workflow(run.workflow):
            held = await self.store.call_request(run.id)
            if held is not None and held.approvers:
                return held.approvers
            return run_deciders(self.config, None)
        workflow = None
        if self.workflows is not None:
            try:
                workflow = await self.workflows.get(run.workflow)
            except NotFound:  # a stored workflow since removed: the project's approvers
                workflow = None
        return run_deciders(self.config, workflow)

    async def cancel_run(self, run_id: str, who: Principal) -> list[TakeoverRequest]:
        if not who.is_admin:
            raise Forbidden("only an admin can cancel a run")
        return await self.store.cancel_run(run_id, who.name, self.clock.now())


def _of_run(request: TakeoverRequest, run_id: str | None) -> None:
    if run_id is not None and request.run_id != run_id:
        raise NotFound("no such takeover request on this run")


def _notes(notes: str | None) -> str | None:
    if notes is None:
        return None
    if len(notes) > MAX_NOTES:
        raise InvalidRequest(f"notes are limited to {MAX_NOTES} characters")
    return notes
