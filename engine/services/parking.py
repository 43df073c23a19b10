"""How a replay parks its run: the steps that wait for someone (an approval node, a gate
diversion, an operator's takeover) or for something (a child run).

A parked run's status becomes ``waiting`` and its lease is given up in the transaction that
creates what it waits for; a decision, or the child's end, re-queues it and a worker replays.
Replayed again, a step that waits asks the journal (``engine.domain.replay.JournalIndex``)
whether its wait is over: the verdict of its request, the status of its child.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.domain import notify
from engine.domain.approvers import approver_names
from engine.domain.delegation import delegated, delegation_events, stand_in_map, widened
from engine.domain.errors import StepError
from engine.domain.expressions import evaluate
from engine.domain.model import (
    TERMINAL_RUN_STATUSES,
    JournalEntry,
    JournalEvent,
    NewEvent,
    Node,
    RunStatus,
    TakeoverKind,
    Workflow,
)
from engine.domain.parking import build_request, takeover_requested
from engine.domain.records import NewRun
from engine.domain.replay import JournalIndex, StepHistory, approval_outcome, denial_text
from engine.services.delegations import away_among
from engine.services.run_writer import RunWriter

Outcome = tuple[Any, str | None] | RunStatus | None
"""What executing a step gives: its (output, branch), or the run's new status (None: no
longer ours)."""


class Parking(RunWriter):
    """The waiting half of a replay (``engine.services.interpreter._Walk``)."""

    index: JournalIndex
    context: dict[str, Any]

    async def _approval(self, workflow: Workflow, node: Node, step: StepHistory) -> Outcome:
        requested = step.last(JournalEvent.TAKEOVER_REQUESTED)
        if requested is None:
            return await self._park_for_approval(workflow, node, step, TakeoverKind.NODE)
        verdict = self.index.verdict(requested)
        if verdict is None:
            return await self._repark(node, requested)
        self.notify_channels = tuple(requested.data.get("channels", ()))
        outcome = approval_outcome(node, verdict)
        if outcome is None:
            return await self.fail(node, denial_text(verdict[1]), step_failed=True)
        return outcome

    async def _park_for_approval(
        self,
        workflow: Workflow,
        node: Node,
        step: StepHistory,
        kind: TakeoverKind,
        *,
        args: Any = None,
        target: Node | None = None,
        confidence: dict[str, Any] | None = None,
        channels: Sequence[str] | None = None,
        approvers: Sequence[str] | None = None,
    ) -> RunStatus | None:
        s = self.s
        names = approver_names(approvers or (), node.approvers, s.default_approvers)
        people = s.expand_people(names)
        chosen = channels if channels is not None else node.channels
        now = s.clock.now()
        away = await away_among(s.store, people, now, (self.run.requested_by,))
        request = build_request(
            request_id=s.ids.new_id(),
            now=now,
            run=self.run,
            workflow=workflow,
            node=node,
            kind=kind,
            context=self.context,
            args=args,
            target=target,
            confidence=confidence,
            channels=s.expand_channels(chosen, widened(people, away), stand_in_map(away)),
            approvers=people,
            escalate_to=s.expand_people(node.escalate_to),
            written=(*names, *node.escalate_to),
        )
        request = delegated(request, away)
        told = s.requester_channels(request.channels, request.requested_by)
        request = notify.with_requester(request, told)
        events = [] if self._is_started(node, step) else [self._started(node)]
        events += [
            takeover_requested(request),
            *delegation_events(request),
            NewEvent(JournalEvent.RUN_WAITING, node.id, {"requestId": request.id}),
        ]
        outbox = notify.new_card(request)
        await self._park(events, takeover=request, outbox=outbox)
        return RunStatus.WAITING

    async def _repark(self, node: Node, requested: JournalEntry) -> RunStatus:
        """Re-queued while its request is still open (e.g. granted but not released)."""
        await self._park(
            [
                NewEvent(
                    JournalEvent.RUN_WAITING, node.id, {"requestId": requested.data["requestId"]}
                )
            ]
        )
        return RunStatus.WAITING

    async def _manual_takeover(self, node: Node, step: StepHistory) -> RunStatus | None:
        for entry in self.index.manual:
            if entry.step_id not in (None, node.id):
                continue
            if entry.step_id is None and step.events and step.events[0].seq < entry.seq:
                # "Before the first step not yet started": this one was under way when the
                # request came. One started after it (its ``step_started`` committed while
                # the request was, the call not made yet: the commit restarted the walk)
                # parks here.
                continue
            verdict = self.index.verdict(entry)
            if verdict is None:
                await self._park(
                    [
                        NewEvent(
                            JournalEvent.RUN_WAITING,
                            node.id,
                            {"requestId": entry.data["requestId"], "kind": entry.data["kind"]},
                        )
                    ]
                )
                return RunStatus.WAITING
            approved, data = verdict
            if not approved:
                return await self.fail(node, denial_text(data), step_failed=True)
            self.notify_channels = tuple(entry.data.get("channels", ()))
        return None

    async def _child(self, node: Node, step: StepHistory) -> Outcome:
        s = self.s
        child_id = step.started.data.get("childRunId") if step.started else None
        if child_id is None:
            try:
                child_input = evaluate(dict(node.args), self.context)
            except StepError as exc:  # raised, it would reach the worker: retried forever
                return await self.fail(node, exc.message, step_failed=True)
            child_id = s.ids.new_id()
            started = self._started(node, childRunId=child_id)
            await self._park(
                [started, NewEvent(JournalEvent.RUN_WAITING, node.id, {"childRunId": child_id})],
                child=NewRun(
                    id=child_id,
                    workflow=node.workflow or "",
                    input=child_input if isinstance(child_input, dict) else {"value": child_input},
                    requested_by=self.run.requested_by,
                    agent=self.run.agent,
                    parent_run_id=self.run.id,
                    parent_step_id=node.id,
                ),
            )
            s.wake()
            return RunStatus.WAITING
        child = await s.store.get_run(child_id)
        if child.status == RunStatus.COMPLETED:
            return {"runId": child.id, "output": child.output}, None
        if child.status in TERMINAL_RUN_STATUSES:
            return await self.fail(
                node,
                f"child run {child.id} {child.status.value}: {child.error or ''}".strip(),
                step_failed=True,
            )
        await self._park([NewEvent(JournalEvent.RUN_WAITING, node.id, {"childRunId": child_id})])
        return RunStatus.WAITING
