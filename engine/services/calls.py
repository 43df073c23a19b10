"""Held calls: an agent asks for one connector action and the policy decides.

``allow`` queues a one-step run (``engine.domain.call_workflow``) at once. ``ask`` creates the run
already parked on a ``policy`` takeover request, with its card in the outbox, in one
transaction: nothing runs until a person releases it, and a denial or expiry fails it. ``block``
stores nothing. An approval binds to one exact call (``engine.domain.binding``): an identical call
within ``BINDING_WINDOW`` of its release runs without a new decision, journaling
``policy_evaluated`` with ``reusedApproval``. A ``block`` rule still wins over a reusable
approval: the policy is evaluated first.

Deciders are the people the deciding rule names, else the project's ``approvers``. The request's
``requested_by`` is the calling principal, so ``Approvals.refusal`` refuses self-approval; the
agent's ``session`` (a person it acts for) is taken out of the deciders, so the person behind the
agent cannot approve its call either.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from engine.config import ActionConfig, AppConfig
from engine.domain import notify
from engine.domain.approvers import (
    acting_agent,
    approver_names,
    approvers_as_written,
    session_person,
)
from engine.domain.binding import binding_hash
from engine.domain.call_workflow import (
    APPROVE_ONLY,
    CALL_PREFIX,
    CALL_STEP,
    EXECUTE,
    call_workflow_name,
    is_call_workflow,
)
from engine.domain.calls_view import CallStatus, CallView, call_view
from engine.domain.delegation import delegated, delegation_events, stand_in_map, widened
from engine.domain.errors import Forbidden, InvalidRequest, NotFound
from engine.domain.expiry import deadline
from engine.domain.expressions import render_text
from engine.domain.model import (
    JournalEvent,
    NewEvent,
    Principal,
    RunStatus,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    TimeoutBehavior,
)
from engine.domain.outbound import OutboundTargets
from engine.domain.parking import takeover_requested
from engine.domain.policy import PolicyDecision, evaluate_policy
from engine.domain.policy_rules import Decision
from engine.domain.records import NewRun
from engine.ports import Clock, IdSource
from engine.ports.store import Store
from engine.services.connectors import ConnectorRegistry
from engine.services.delegations import away_among

__all__ = ["BINDING_WINDOW", "CallRequest", "CallStatus", "CallView", "HeldCalls"]

BINDING_WINDOW = timedelta(minutes=15)
MAX_SUMMARY = 300
MAX_CALLBACK_URL = 2000


@dataclass(frozen=True, slots=True)
class CallRequest:
    """What an agent asks for (the body of ``POST /v1/calls``)."""

    connector: str
    action: str
    args: dict[str, Any] = field(default_factory=dict)
    account: str | None = None
    reason: str | None = None
    agent: str | None = None
    session: str | None = None  # the person (or chat identity) the agent acts for
    callback_url: str | None = None
    mode: str = EXECUTE  # or APPROVE_ONLY: record the approval, call nothing
    idempotency_key: str | None = None


class HeldCalls:
    """Submits calls and reports their outcome; one per engine."""

    def __init__(
        self,
        config: AppConfig,
        store: Store,
        connectors: ConnectorRegistry,
        clock: Clock,
        ids: IdSource,
        *,
        wake: Callable[[], None] = lambda: None,
        poll_seconds: float = 0.25,
    ) -> None:
        self.config = config
        self.store = store
        self.connectors = connectors
        self.clock = clock
        self.ids = ids
        self.wake = wake
        self.poll_seconds = poll_seconds
        self.outbound = OutboundTargets(config.server.allow_internal_targets)

    async def submit(self, call: CallRequest, who: Principal) -> CallView:
        """Decide ``call`` and store what the decision needs. A ``block`` stores nothing."""
        agent = acting_agent(who, call.agent)  # Forbidden for another agent's name
        call = dataclasses.replace(call, agent=agent)
        connector = self.config.connectors.get(call.connector)
        if connector is None:
            raise NotFound(f"connector {call.connector!r} is not configured")
        spec = connector.actions.get(call.action)
        if spec is None:
            raise NotFound(f"connector {call.connector} has no action {call.action!r}")
        self.connectors.get(CALL_PREFIX + connector.name)  # NotFound: nothing can run it
        if call.mode not in (EXECUTE, APPROVE_ONLY):
            raise InvalidRequest(f"mode must be {EXECUTE} or {APPROVE_ONLY}")
        if call.callback_url is not None:
            check_callback_url(call.callback_url, self.outbound)
        account = call.account or connector.account
        decision = evaluate_policy(self.config, connector, call.action, call.args)
        if decision.decision == Decision.BLOCK:
            return CallView(
                execution_id=None,
                status=CallStatus.BLOCKED,
                reason=decision.reason,
                rule=decision.rule,
            )
        now = self.clock.now()
        bound = binding_hash(connector.name, call.action, call.args, account)
        summary = approval_summary(spec, connector.name, call.args, account, call.agent)
        evaluated: dict[str, Any] = {
            **decision.as_json(),
            "connector": connector.name,
            "action": call.action,
            "bindingHash": bound,
            "mode": call.mode,
        }
        reused = None
        if decision.decision == Decision.ASK:
            reused = await self.store.recent_release(bound, now - BINDING_WINDOW)
            if reused is not None:
                evaluated["reusedApproval"] = reused.id
        new = NewRun(
            id=self.ids.new_id(),
            workflow=call_workflow_name(connector.name, call.action),
            input=_run_input(call, account),
            requested_by=who.name,
            agent=agent,
            idempotency_key=CALL_PREFIX + call.idempotency_key if call.idempotency_key else None,
        )
        policy_event = NewEvent(JournalEvent.POLICY_EVALUATED, CALL_STEP, evaluated)
        if decision.decision == Decision.ALLOW or reused is not None:
            run, created = await self.store.create_run(new, now, [policy_event])
            if created:
                self.wake()
            return await self.view(run.id)
        request = await self._request(new, decision, call, connector.name, account, bound, summary)
        told = self.config.requester_channels(request.channels, request.requested_by)
        request = notify.with_requester(request, told)
        run, created = await self.store.create_run(
            dataclasses.replace(new, status=RunStatus.WAITING),
            now,
            [
                policy_event,
                takeover_requested(request),
                *delegation_events(request),
                NewEvent(JournalEvent.RUN_WAITING, CALL_STEP, {"requestId": request.id}),
            ],
            takeover=request,
            outbox=notify.new_card(request),
        )
        if created:
            self.wake()  # the card goes out now
        return await self.view(run.id)

    async def _request(
        self,
        new: NewRun,
        decision: PolicyDecision,
        call: CallRequest,
        connector: str,
        account: str | None,
        bound: str,
        summary: str,
    ) -> TakeoverRequest:
        now = self.clock.now()
        expires = deadline(now, decision.timeout_minutes, self.config.approvals.ttl_seconds)
        names = approver_names(decision.approvers, self.config.approvers)
        deciders = self._deciders(names, call.session)
        # Someone away hands it to their delegate, never to the person the agent acts for.
        barred = (new.requested_by, self.session_person(call.session))
        away = await away_among(self.store, deciders, now, barred)
        request = TakeoverRequest(
            id=self.ids.new_id(),
            run_id=new.id,
            step_id=CALL_STEP,
            kind=TakeoverKind.POLICY,
            status=TakeoverStatus.PENDING,
            reason=call.reason or summary,
            created_at=now,
            expires_at=expires,
            approvers=deciders,
            timeout_behavior=TimeoutBehavior.AUTO_REJECT,
            channels=self.config.expand_channels(
                decision.channels, widened(deciders, away), stand_in_map(away)
            ),
            requested_by=new.requested_by,
            details={
                "connector": connector,
                "action": call.action,
                "args": call.args,
                "account": account,
                "bindingHash": bound,
                "summary": summary,
                "policy": decision.as_json(),
                "agent": new.agent,
                "session": call.session,
                "reason": call.reason,
                "mode": call.mode,
                "nodeType": "connector",
                "stepId": CALL_STEP,
                **approvers_as_written(names),  # judged again under the groups in force
            },
        )
        return delegated(request, away)

    def _deciders(self, names: Sequence[str], session: str | None) -> tuple[str, ...]:
        """The people ``names`` (the rule's, else the project's approvers) expand to, never the
        agent's own session. ``()`` lets any approver decide; with a session, "anyone" becomes
        every person but it."""
        people = self.config.expand_people(names)
        own = self.session_person(session)
        if own is None:
            return people
        deciders = tuple(p for p in (people or tuple(self.config.people)) if p != own)
        if not deciders:
            raise Forbidden(
                f"only {own} could approve this call, and the agent acts for {own}; "
                "name other approvers in the rule or in approvers:"
            )
        return deciders

    def session_person(self, session: str | None) -> str | None:
        """The person a session names: their name, email, Slack or Teams id."""
        return session_person(self.config, session)

    async def view(self, execution_id: str) -> CallView:
        """Where a call stands now (``NotFound`` for an unknown id or an ordinary run)."""
        run = await self.store.get_run(execution_id)
        if not is_call_workflow(run.workflow):
            raise NotFound(f"no call {execution_id}", execution_id=execution_id)
        request = await self.store.call_request(run.id)
        return call_view(run, request, self.clock.now())

    async def wait(self, execution_id: str, seconds: float) -> CallView:
        """Poll until the call's status changes or ``seconds`` pass on the injected clock;
        returns the latest view. Each tick reads one run and one request, and no in-process
        state is involved, so any replica may answer a long poll, whichever replica runs the
        call. The ticks are polls of the database, spaced in real time (a manual clock that
        stands still must not stop them); the deadline is the clock's."""
        deadline = self.clock.now() + timedelta(seconds=max(seconds, 0.0))
        first = current = await self.view(execution_id)
        delay = min(0.02, self.poll_seconds)
        while current.status == first.status and not current.is_final:
            left = (deadline - self.clock.now()).total_seconds()
            if left <= 0:
                break
            await asyncio.sleep(min(delay, left))  # a database poll: real time (see above)
            delay = min(delay * 1.5, self.poll_seconds)
            current = await self.view(execution_id)
        return current


def _run_input(call: CallRequest, account: str | None) -> dict[str, Any]:
    """The run's input: what the synthetic node evaluates, plus what outcomes need later."""
    data: dict[str, Any] = {
        "args": call.args,
        "account": account,
        "mode": call.mode,
        "reason": call.reason,
        "session": call.session,
    }
    if call.callback_url:
        data["callbackUrl"] = call.callback_url
    return data


def check_callback_url(url: str, guard: OutboundTargets) -> None:
    """Callbacks are POSTed from the server, so only plain http(s) URLs are accepted (no
    credentials in them), and none that names an internal address (``engine.domain.outbound``; what
    a host name resolves to is checked again when the callback is sent)."""
    if len(url) > MAX_CALLBACK_URL:
        raise InvalidRequest(f"callbackUrl is limited to {MAX_CALLBACK_URL} characters")
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError as exc:
        raise InvalidRequest(f"callbackUrl is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise InvalidRequest("callbackUrl must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise InvalidRequest("callbackUrl must not contain credentials")
    guard.check_url(url)


def approval_summary(
    spec: ActionConfig,
    connector: str,
    args: Mapping[str, Any],
    account: str | None,
    agent: str | None,
) -> str:
    """One plain-text line for the card: the action's ``summary`` template rendered over
    ``{args, account, connector, action, agent}`` (argument values are data, never templates),
    else a generic line naming the arguments. Cards escape it for their format."""
    if spec.summary:
        context = {
            "args": dict(args),
            "account": account,
            "connector": connector,
            "action": spec.name,
            "agent": agent,
        }
        try:
            text = _one_line(render_text(spec.summary, context, strict=True))
        except Exception:  # a summary that cannot render falls back; it never fails the call
            text = ""
        if text:
            return text
    names = list(args)
    if not names:
        return _one_line(f"{connector}.{spec.name} with no arguments")
    shown = ", ".join(names[:8]) + (", …" if len(names) > 8 else "")
    noun = "argument" if len(names) == 1 else "arguments"
    return _one_line(f"{connector}.{spec.name} with {len(names)} {noun} ({shown})")


def _one_line(text: str) -> str:
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return flat if len(flat) <= MAX_SUMMARY else flat[: MAX_SUMMARY - 1] + "…"
