"""Replay: what a run's journal says, indexed (each step's events, the order steps were
started in, the outcome of every takeover request), and the one walk of the graph against it
(``Replay``: the nondeterminism check and which steps are skipped)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.domain.errors import NondeterminismError
from engine.domain.model import (
    JournalEntry,
    JournalEvent,
    NewEvent,
    Node,
    NodeType,
    TakeoverKind,
    TimeoutBehavior,
    Workflow,
)


@dataclass
class StepHistory:
    """Everything the journal says about one step."""

    started: JournalEntry | None = None
    events: list[JournalEntry] = field(default_factory=list)

    def last(self, event: JournalEvent) -> JournalEntry | None:
        for entry in reversed(self.events):
            if entry.event == event:
                return entry
        return None

    def count(self, event: JournalEvent, **match: Any) -> int:
        return sum(
            1
            for e in self.events
            if e.event == event and all(e.data.get(k) == v for k, v in match.items())
        )


OUTCOMES = {
    JournalEvent.TAKEOVER_RELEASED: "approved",
    JournalEvent.TAKEOVER_DENIED: "denied",
    JournalEvent.TAKEOVER_EXPIRED: "expired",
    JournalEvent.TAKEOVER_CANCELLED: "cancelled",
}


class JournalIndex:
    """One pass over a journal; the interpreter asks it instead of scanning events."""

    def __init__(self, journal: list[JournalEntry]) -> None:
        self.steps: dict[str, StepHistory] = {}
        self.started_order: list[JournalEntry] = []
        self.outcomes: dict[str, tuple[str, JournalEntry]] = {}
        self.manual: list[JournalEntry] = []  # requests that park a run before a step
        self.grant_notes: dict[str, Any] = {}
        for entry in journal:
            request_id = entry.data.get("requestId")
            if entry.event in OUTCOMES and request_id:
                self.outcomes[request_id] = (OUTCOMES[entry.event], entry)
            if entry.event == JournalEvent.TAKEOVER_GRANTED and request_id:
                self.grant_notes[request_id] = entry.data.get("notes")
            if entry.event == JournalEvent.TAKEOVER_REQUESTED and entry.data.get("kind") in (
                TakeoverKind.MANUAL.value,
                TakeoverKind.POLICY.value,
            ):
                self.manual.append(entry)
            if entry.step_id is None:
                continue
            step = self.steps.get(entry.step_id)
            if step is None:
                step = self.steps[entry.step_id] = StepHistory()
            if entry.event == JournalEvent.STEP_STARTED and step.started is None:
                step.started = entry
                self.started_order.append(entry)
            step.events.append(entry)

    def verdict(self, requested: JournalEntry) -> tuple[bool, dict[str, Any]] | None:
        """(approved?, output) once the request has an outcome; None while it is open."""
        request_id = requested.data["requestId"]
        found = self.outcomes.get(request_id)
        if found is None:
            return None
        outcome, entry = found
        data: dict[str, Any] = {"requestId": request_id, "outcome": outcome}
        if outcome == "approved":
            data.update(approved=True, by=entry.data.get("by"))
            data["notes"] = self.grant_notes.get(request_id)
            return True, data
        if outcome == "expired" and entry.data.get("behavior") == TimeoutBehavior.AUTO_APPROVE:
            data.update(approved=True, by="timeout (auto-approve)")
            return True, data
        data.update(approved=False, by=entry.data.get("by"), notes=entry.data.get("notes"))
        return False, data


ON_DENY = "onDeny"  # the branch a denied approval takes to its node's ``onDeny``


def approval_outcome(
    node: Node, verdict: tuple[bool, dict[str, Any]]
) -> tuple[dict[str, Any], str | None] | None:
    """The (output, branch) an approval step completes with, given its request's ``verdict``
    (``JournalIndex.verdict``): approved, it goes on; denied, it follows ``onDeny``. None when
    a denial fails the run: the node has no ``onDeny``."""
    approved, data = verdict
    if approved:
        return data, None
    if node.on_deny:
        return data, ON_DENY
    return None


def follow(workflow: Workflow, node: Node, branch: str | None) -> Node | None:
    """The node after ``node``, given the branch its step took."""
    if branch == ON_DENY and node.on_deny:
        return workflow.node(node.on_deny)
    return workflow.successor(node)


class Replay:
    """The one walk of a workflow's graph against its journal: how replay decides which steps
    it skips. From the first node on, ``visit`` checks the node against the step the journal
    started at that point (a different node id or type raises ``NondeterminismError``: the
    run fails loudly, it never guesses) and gives the node's history with its recorded
    ``step_completed``, if any: a completed step is skipped (its recorded output stands) and
    the first one without is executed. ``follow`` moves on along the branch the step took.

    The interpreter (``engine.services.interpreter``) walks with it and executes what is not
    done; ``decided_approval`` walks with it to foresee what a replay commits first."""

    def __init__(self, workflow: Workflow, index: JournalIndex, run_id: str | None = None):
        self.workflow = workflow
        self.index = index
        self.run_id = run_id
        self.node: Node | None = workflow.nodes[0] if workflow.nodes else None
        self.visited = 0

    def visit(self) -> tuple[StepHistory, JournalEntry | None]:
        """The current node's history and its ``step_completed`` (None: not done yet)."""
        node = self.node
        assert node is not None, "visit after the walk ended"
        started = self.index.started_order
        if self.visited < len(started):
            recorded = started[self.visited]
            if recorded.step_id != node.id or recorded.data.get("nodeType") != node.type:
                raise NondeterminismError(
                    f"journal seq {recorded.seq} started step {recorded.step_id!r} "
                    f"({recorded.data.get('nodeType')}) but the graph has {node.id!r} "
                    f"({node.type.value}) there",
                    run_id=self.run_id,
                )
        self.visited += 1
        step = self.index.steps.get(node.id, StepHistory())
        return step, step.last(JournalEvent.STEP_COMPLETED)

    def follow(self, branch: str | None) -> Node | None:
        """Move past the current node along ``branch``; the next node (None: the end)."""
        assert self.node is not None, "follow after the walk ended"
        self.node = follow(self.workflow, self.node, branch)
        return self.node


def decided_approval(workflow: Workflow, journal: list[JournalEntry]) -> list[NewEvent]:
    """The events a replay commits first when the journal ends with a decided approval node
    that an action step follows: the approval step's completion and the action's
    ``step_started``. ``[]`` whenever anything else could come first (a manual takeover, a
    denial that fails the run, a child run, the end of the workflow, a journal that does not
    match the graph): the replay decides those itself."""
    index = JournalIndex(journal)
    if index.manual:
        return []
    replay = Replay(workflow, index)
    try:
        for _ in workflow.nodes:  # at most once per node on the way
            node = replay.node
            if node is None:
                return []
            step, completed = replay.visit()
            if completed is None:
                break
            replay.follow(completed.data.get("branch"))
        else:
            return []
    except NondeterminismError:
        return []  # the replay fails the run itself
    if node.type != NodeType.APPROVAL:
        return []
    requested = step.last(JournalEvent.TAKEOVER_REQUESTED)
    verdict = index.verdict(requested) if requested is not None else None
    if verdict is None:
        return []
    outcome = approval_outcome(node, verdict)
    if outcome is None:
        return []
    data, branch = outcome
    after = follow(workflow, node, branch)
    if after is None or after.type in (NodeType.APPROVAL, NodeType.WORKFLOW):
        return []
    if after.id in index.steps:
        return []
    return [
        NewEvent(JournalEvent.STEP_COMPLETED, node.id, {"output": data, "branch": branch}),
        NewEvent(JournalEvent.STEP_STARTED, after.id, {"nodeType": after.type.value}),
    ]


def default_reason(node: Node, kind: TakeoverKind) -> str:
    if kind == TakeoverKind.GATE:
        return f"Low confidence before {node.type.value} step {node.id}"
    return f"Approval required at {node.id}"


def denial_text(data: dict[str, Any]) -> str:
    outcome = data.get("outcome", "denied")
    text = f"{outcome}" + (f" by {data['by']}" if data.get("by") else "")
    return text + (f": {data['notes']}" if data.get("notes") else "")


def brief(value: Any, limit: int = 2000) -> Any:
    """Outputs travel in notices; keep them small there (the journal keeps them whole)."""
    text = json.dumps(value, default=str)
    return value if len(text) <= limit else text[:limit] + "…"


def parking_step(workflow: Workflow, journal: list[JournalEntry], requested_at: int) -> str | None:
    """The step a run parks before for an operator's takeover without a step, journaled at
    seq ``requested_at``: the first step on the run's way that had not started by then (the
    steps under way go on, as ``_manual_takeover`` in the interpreter lets them). None when no
    such step is left: the run ends, or a denial fails it, before it could park."""
    index = JournalIndex([entry for entry in journal if entry.seq < requested_at])
    replay = Replay(workflow, index)
    try:
        for _ in range(len(workflow.nodes) + 1):  # each node once: the graph has no cycle
            node = replay.node
            if node is None:
                return None
            step, completed = replay.visit()
            if completed is not None:
                replay.follow(completed.data.get("branch"))
                continue
            if not step.events:
                return node.id
            branch = None  # under way: it goes on, and the run after it
            if node.type == NodeType.APPROVAL:
                requested = step.last(JournalEvent.TAKEOVER_REQUESTED)
                verdict = index.verdict(requested) if requested is not None else None
                if verdict is not None:
                    outcome = approval_outcome(node, verdict)
                    if outcome is None:
                        return None
                    branch = outcome[1]
            replay.follow(branch)
    except NondeterminismError:
        return None  # the replay fails the run itself
    return None
