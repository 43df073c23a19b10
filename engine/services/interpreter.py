"""The durable interpreter: replay-and-continue over a run's journal.

``advance(run_id, owner)`` walks the graph from the start. A step with ``step_completed`` in the
journal yields its recorded output and is not executed again; the first step without one is
executed. A recorded step whose node id or type differs from the graph at that point raises
``NondeterminismError`` (the run fails loudly; it never guesses).

Side effects are at-least-once with idempotency: ``step_started`` is committed before a
connector is called, and the call carries ``{run_id}:{step_id}:{attempt}``. After a crash a step
with ``step_started`` and no ``step_completed`` is retried with the same key. A connector action
declared ``kind: read`` has no side effect to guard: its ``step_started`` is committed with its
result (and whatever follows it up to the next commit), one transaction fewer per read.

A run that must wait (approval, gate diversion, manual takeover, child run) is parked: its
status becomes ``waiting`` and its lease is given up in the same transaction that creates what
it waits for. Nothing is held while it waits; a decision re-queues it and a worker replays.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from engine.domain import notify
from engine.domain.errors import (
    ConfigError,
    NondeterminismError,
    NotFound,
    StepError,
    TransitionRefused,
)
from engine.domain.expressions import evaluate
from engine.domain.model import (
    TERMINAL_RUN_STATUSES,
    JournalEntry,
    JournalEvent,
    NewEvent,
    Node,
    NodeType,
    Run,
    RunStatus,
    TakeoverKind,
    Workflow,
)
from engine.domain.parking import build_request
from engine.domain.records import NewRun
from engine.domain.replay import (
    JournalIndex,
    StepHistory,
    brief,
    decided_approval,
    denial_text,
    follow,
)
from engine.services.context import Services
from engine.services.run_writer import Restart, RunWriter
from engine.services.steps import call_step, gate_question

log = logging.getLogger(__name__)

Written = tuple[Run, list[JournalEntry]]

MAX_ATTEMPTS = 3
_RETRY_BACKOFF_SECONDS = (0.2, 1.0)


class Interpreter:
    def __init__(self, services: Services) -> None:
        self.s = services

    async def advance(
        self, run_id: str, owner: str, written: Written | None = None
    ) -> RunStatus | None:
        """Move a claimed run as far as it can go. Returns its new status, or None when the
        run is no longer ours (lease lost, cancelled meanwhile). ``written``: the run and its
        journal as the transaction that created it claimed wrote them, not read back."""
        for _ in range(20):
            try:
                return await self._advance_once(run_id, owner, written)
            except Restart:
                written = None
                continue  # events we did not write appeared (an operator's request): replay
            except TransitionRefused:
                return None
        log.error("run %s kept changing under the worker; giving it back", run_id)
        return None

    def resume_plan(self, run: Run, journal: list[JournalEntry]) -> list[NewEvent]:
        """What this run's replay would commit first after the decision just appended: a
        decision's transaction that claims the run for a worker here appends it too (one
        transaction fewer per resume). Only for workflows that cannot change meanwhile."""
        workflow = self.s.workflows.fixed(run.workflow)
        return [] if workflow is None else decided_approval(workflow, journal)

    async def _advance_once(
        self, run_id: str, owner: str, written: Written | None
    ) -> RunStatus | None:
        s = self.s
        run, journal = written or await s.store.run_and_journal(run_id)
        if run.status != RunStatus.RUNNING or run.lease_owner != owner:
            return None
        walk = _Walk(self, run, owner, journal)
        try:
            workflow = await s.workflows.get(run.workflow)
        except NotFound as exc:
            return await walk.fail(None, exc.message)
        except ConfigError as exc:  # stored by an older version that checked less: never runs
            return await walk.fail(None, f"workflow {run.workflow!r} is invalid: {exc.message}")
        try:
            return await walk.walk(workflow)
        except NondeterminismError as exc:
            log.error("run %s: %s", run_id, exc.message)
            return await walk.fail(None, f"nondeterminism: {exc.message}")


class _Walk(RunWriter):
    """One replay of one run, by the worker that holds its lease."""

    def __init__(self, interp: Interpreter, run: Run, owner: str, journal: list[JournalEntry]):
        super().__init__(interp.s, run, owner, journal[-1].seq + 1 if journal else 1)
        self.journal = journal
        index = JournalIndex(journal)
        self.index = index
        self.steps = index.steps
        self.started_order = index.started_order
        self.manual = index.manual
        self.context: dict[str, Any] = {
            "input": run.input,
            "steps": {},
            "run": {"id": run.id, "workflow": run.workflow, "agent": run.agent},
        }
        self.last_output: Any = None

    def open_requests(self) -> bool:
        return any(self.index.verdict(entry) is None for entry in self.manual)

    # -- the walk ------------------------------------------------------------------------------

    async def walk(self, workflow: Workflow) -> RunStatus | None:
        node: Node | None = workflow.nodes[0] if workflow.nodes else None
        visited = 0
        while node is not None:
            if visited < len(self.started_order):
                recorded = self.started_order[visited]
                if recorded.step_id != node.id or recorded.data.get("nodeType") != node.type:
                    raise NondeterminismError(
                        f"journal seq {recorded.seq} started step {recorded.step_id!r} "
                        f"({recorded.data.get('nodeType')}) but the graph has {node.id!r} "
                        f"({node.type.value}) there",
                        run_id=self.run.id,
                    )
            visited += 1
            step = self.steps.get(node.id, StepHistory())
            completed = step.last(JournalEvent.STEP_COMPLETED)
            if completed is not None:
                # The step after a decided approval posts its result in the approval's
                # thread; a completed step already has.
                requested = step.last(JournalEvent.TAKEOVER_REQUESTED)
                if node.type == NodeType.APPROVAL and requested is not None:
                    self.notify_channels = tuple(requested.data.get("channels", ()))
                else:
                    self.notify_channels = ()
                self._remember(node, completed.data.get("output"))
                node = follow(workflow, node, completed.data.get("branch"))
                continue
            if self.s.stopping() and not step.events:
                return await self._hand_back()
            parked = await self._manual_takeover(node, step)
            if parked is not None:
                return parked
            result = await self._execute(workflow, node, step)
            if isinstance(result, RunStatus) or result is None:
                return result
            output, branch = result
            self.pending.append(
                NewEvent(JournalEvent.STEP_COMPLETED, node.id, {"output": output, "branch": branch})
            )
            self._remember(node, output)
            node = follow(workflow, node, branch)
        return await self._finish(RunStatus.COMPLETED, output=self.last_output)

    def _remember(self, node: Node, output: Any) -> None:
        self.context["steps"][node.id] = {"output": output}
        self.last_output = output

    async def _execute(
        self, workflow: Workflow, node: Node, step: StepHistory
    ) -> tuple[Any, str | None] | RunStatus | None:
        if node.type == NodeType.APPROVAL:
            return await self._approval(workflow, node, step)
        if node.type == NodeType.WORKFLOW:
            return await self._child(node, step)
        return await self._action(workflow, node, step)

    # -- approval nodes ------------------------------------------------------------------------

    async def _approval(
        self, workflow: Workflow, node: Node, step: StepHistory
    ) -> tuple[Any, str | None] | RunStatus | None:
        requested = step.last(JournalEvent.TAKEOVER_REQUESTED)
        if requested is None:
            return await self._park_for_approval(workflow, node, step, TakeoverKind.NODE)
        verdict = self.index.verdict(requested)
        if verdict is None:
            return await self._repark(node, requested)
        approved, data = verdict
        self.notify_channels = tuple(requested.data.get("channels", ()))
        if approved:
            return data, None
        if node.on_deny:
            return data, "onDeny"
        return await self.fail(node, denial_text(data), step_failed=True)

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
        request = build_request(
            request_id=s.ids.new_id(),
            now=s.clock.now(),
            run=self.run,
            workflow=workflow,
            node=node,
            kind=kind,
            context=self.context,
            args=args,
            target=target,
            confidence=confidence,
            channels=channels,
            approvers=s.expand_people(approvers or node.approvers or s.default_approvers),
            escalate_to=s.expand_people(node.escalate_to),
        )
        request_id, chosen_channels = request.id, request.channels
        events = [] if self._is_started(node, step) else [self._started(node)]
        events += [
            NewEvent(
                JournalEvent.TAKEOVER_REQUESTED,
                node.id,
                {
                    "requestId": request_id,
                    "kind": kind.value,
                    "reason": request.reason,
                    "channels": list(chosen_channels),
                    "expiresAt": request.expires_at.isoformat(),
                },
            ),
            NewEvent(JournalEvent.RUN_WAITING, node.id, {"requestId": request_id}),
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
        for entry in self.manual:
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

    # -- child runs ----------------------------------------------------------------------------

    async def _child(
        self, node: Node, step: StepHistory
    ) -> tuple[Any, str | None] | RunStatus | None:
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

    # -- tool, connector and ai-step nodes -----------------------------------------------------

    async def _action(
        self, workflow: Workflow, node: Node, step: StepHistory
    ) -> tuple[Any, str | None] | RunStatus | None:
        s = self.s
        try:
            args = evaluate(dict(node.args), self.context)
        except StepError as exc:
            return await self.fail(node, exc.message, step_failed=True)
        if not self._is_started(node, step):
            self.pending.append(self._started(node))
        gated = step.last(JournalEvent.CONFIDENCE_EVALUATED)
        gated_data = gated.data if gated is not None else None
        if gated_data is None and s.gate is not None:
            gated_data = await s.gate.assess(gate_question(self.run, node, args, self.context))
            if gated_data is not None:
                self.pending.append(
                    NewEvent(JournalEvent.CONFIDENCE_EVALUATED, node.id, gated_data)
                )
        if gated_data is not None and gated_data.get("decision") == "divert":
            requested = step.last(JournalEvent.TAKEOVER_REQUESTED)
            if requested is None:
                self.outbox += notify.notice(
                    gated_data.get("channels", ()),
                    self.run.id,
                    "confidence",
                    f"{self.run.id}:{node.id}",
                    {"runId": self.run.id, "stepId": node.id, "confidence": gated_data},
                )
                return await self._park_for_approval(
                    workflow,
                    node,
                    step,
                    TakeoverKind.GATE,
                    args=args,
                    target=node,
                    confidence=gated_data,
                    channels=gated_data.get("channels", ()),
                    approvers=gated_data.get("approvers", ()),
                )
            verdict = self.index.verdict(requested)
            if verdict is None:
                return await self._repark(node, requested)
            approved, data = verdict
            self.notify_channels = tuple(requested.data.get("channels", ()))
            if not approved:
                return await self.fail(node, denial_text(data), step_failed=True)
        attempt = 1 + step.count(JournalEvent.STEP_FAILED, retryable=True)
        reads_only = s.reads_only(node)
        while True:
            if not reads_only:
                await self._commit([])  # step_started (and what came before) is durable first
            try:
                output = await call_step(self.s, self.run, node, args, attempt, self.context)
                break
            except StepError as exc:
                if exc.retryable and attempt < MAX_ATTEMPTS:
                    await self._commit(
                        [
                            NewEvent(
                                JournalEvent.STEP_FAILED,
                                node.id,
                                {"error": exc.message, "attempt": attempt, "retryable": True},
                            )
                        ]
                    )
                    await asyncio.sleep(_RETRY_BACKOFF_SECONDS[min(attempt, 2) - 1])
                    attempt += 1
                    continue
                return await self.fail(node, exc.message, step_failed=True, attempt=attempt)
        if self.notify_channels:
            self.outbox += notify.notice(
                self.notify_channels,
                self.run.id,
                "step_result",
                f"{self.run.id}:{node.id}",
                {"runId": self.run.id, "stepId": node.id, "ok": True, "output": brief(output)},
            )
            self.notify_channels = ()
        return output, None
