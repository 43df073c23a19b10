"""The durable interpreter: replay-and-continue over a run's journal.

``advance(run_id, owner)`` walks the graph from the start with ``engine.domain.replay.Replay``
(the one walker): a step with ``step_completed`` in the journal yields its recorded output and
is not executed again; the first step without one is executed. A recorded step whose node id
or type differs from the graph at that point raises ``NondeterminismError`` (the run fails
loudly; it never guesses).

Side effects are at-least-once with idempotency: ``step_started`` is committed before a
connector is called, and the call carries ``{run_id}:{step_id}:{attempt}``. After a crash a step
with ``step_started`` and no ``step_completed`` is retried with the same key. A connector action
declared ``kind: read`` has no side effect to guard: its ``step_started`` is committed with its
result (and whatever follows it up to the next commit), one transaction fewer per read.

A run that must wait (approval, gate diversion, manual takeover, child run) is parked
(``engine.services.parking``): nothing is held while it waits; a decision re-queues it and a
worker replays. A retryable failure is tried again on the policy of ``engine.services.steps``
(``RETRY``), its backoff slept on the injected clock.
"""

from __future__ import annotations

import logging
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
from engine.domain.replay import (
    JournalIndex,
    Replay,
    StepHistory,
    brief,
    decided_approval,
    denial_text,
)
from engine.domain.verdicts import GateVerdict
from engine.services.context import Services
from engine.services.parking import Outcome, Parking
from engine.services.run_writer import Restart
from engine.services.steps import RETRY, call_step, gate_question

log = logging.getLogger(__name__)

Written = tuple[Run, list[JournalEntry]]


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


class _Walk(Parking):
    """One replay of one run, by the worker that holds its lease."""

    def __init__(self, interp: Interpreter, run: Run, owner: str, journal: list[JournalEntry]):
        super().__init__(interp.s, run, owner, journal[-1].seq + 1 if journal else 1)
        self.journal = journal
        self.index = JournalIndex(journal)
        self.context: dict[str, Any] = {
            "input": run.input,
            "steps": {},
            "run": {"id": run.id, "workflow": run.workflow, "agent": run.agent},
        }
        self.last_output: Any = None

    def open_requests(self) -> bool:
        return any(self.index.verdict(entry) is None for entry in self.index.manual)

    # -- the walk ------------------------------------------------------------------------------

    async def walk(self, workflow: Workflow) -> RunStatus | None:
        replay = Replay(workflow, self.index, self.run.id)
        while (node := replay.node) is not None:
            step, completed = replay.visit()
            if completed is not None:
                # The step after a decided approval posts its result in the approval's
                # thread; a completed step already has.
                requested = step.last(JournalEvent.TAKEOVER_REQUESTED)
                if node.type == NodeType.APPROVAL and requested is not None:
                    self.notify_channels = tuple(requested.data.get("channels", ()))
                else:
                    self.notify_channels = ()
                self._remember(node, completed.data.get("output"))
                replay.follow(completed.data.get("branch"))
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
            replay.follow(branch)
        return await self._finish(RunStatus.COMPLETED, output=self.last_output)

    def _remember(self, node: Node, output: Any) -> None:
        self.context["steps"][node.id] = {"output": output}
        self.last_output = output

    async def _execute(self, workflow: Workflow, node: Node, step: StepHistory) -> Outcome:
        if node.type == NodeType.APPROVAL:
            return await self._approval(workflow, node, step)
        if node.type == NodeType.WORKFLOW:
            return await self._child(node, step)
        return await self._action(workflow, node, step)

    # -- tool, connector and ai-step nodes -----------------------------------------------------

    async def _action(self, workflow: Workflow, node: Node, step: StepHistory) -> Outcome:
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
        if gated_data is not None and gated_data.get("decision") == GateVerdict.DIVERT:
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
                if RETRY.retries(exc, attempt):
                    await self._commit(
                        [
                            NewEvent(
                                JournalEvent.STEP_FAILED,
                                node.id,
                                {"error": exc.message, "attempt": attempt, "retryable": True},
                            )
                        ]
                    )
                    await s.clock.sleep(RETRY.backoff(attempt))
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
