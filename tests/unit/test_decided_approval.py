"""``replay.decided_approval``: what a decision's transaction may append for the worker (the
approval step's completion and the next action's start), and every case it must leave to the
replay."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engine.config.workflows import load_workflow
from engine.domain.model import JournalEntry, JournalEvent, NewEvent
from engine.domain.replay import decided_approval

AT = datetime(2026, 1, 1, tzinfo=UTC)
ACT = {"id": "act", "type": "connector", "connector": "demo-ledger", "action": "note"}
NODES: list[dict[str, Any]] = [
    {"id": "prepare", "type": "connector", "connector": "demo-ledger", "action": "note"},
    {"id": "approve", "type": "approval", "onDeny": "undo"},
    ACT,
    {"id": "undo", "type": "connector", "connector": "demo-ledger", "action": "note"},
]


def journal(*events: tuple[JournalEvent, str | None, dict[str, Any]]) -> list[JournalEntry]:
    return [
        JournalEntry("r1", seq, e, step, data, AT) for seq, (e, step, data) in enumerate(events, 1)
    ]


def parked(*decision: tuple[JournalEvent, str | None, dict[str, Any]]) -> list[JournalEntry]:
    """prepare done, parked at ``approve`` (request tk1), then ``decision``."""
    return journal(
        (JournalEvent.RUN_STARTED, None, {}),
        (JournalEvent.STEP_STARTED, "prepare", {"nodeType": "connector"}),
        (JournalEvent.STEP_COMPLETED, "prepare", {"output": 1, "branch": None}),
        (JournalEvent.STEP_STARTED, "approve", {"nodeType": "approval"}),
        (JournalEvent.TAKEOVER_REQUESTED, "approve", {"requestId": "tk1", "kind": "node"}),
        (JournalEvent.RUN_WAITING, "approve", {"requestId": "tk1"}),
        *decision,
    )


RELEASED = (
    (JournalEvent.TAKEOVER_GRANTED, "approve", {"requestId": "tk1", "by": "bob", "notes": "ok"}),
    (JournalEvent.TAKEOVER_RELEASED, "approve", {"requestId": "tk1", "by": "bob"}),
    (JournalEvent.RUN_RESUMED, "approve", {"requestId": "tk1"}),
)
DENIED = ((JournalEvent.TAKEOVER_DENIED, "approve", {"requestId": "tk1", "by": "bob"}),)


def test_a_released_approval_completes_and_starts_the_next_action() -> None:
    workflow = load_workflow("w", NODES, "nodes")
    assert decided_approval(workflow, parked(*RELEASED)) == [
        NewEvent(
            JournalEvent.STEP_COMPLETED,
            "approve",
            {
                "output": {
                    "requestId": "tk1",
                    "outcome": "approved",
                    "approved": True,
                    "by": "bob",
                    "notes": "ok",
                },
                "branch": None,
            },
        ),
        NewEvent(JournalEvent.STEP_STARTED, "act", {"nodeType": "connector"}),
    ]


def test_a_denial_follows_on_deny() -> None:
    workflow = load_workflow("w", NODES, "nodes")
    completed, started = decided_approval(workflow, parked(*DENIED))
    assert completed.step_id == "approve" and completed.data["branch"] == "onDeny"
    assert completed.data["output"]["approved"] is False
    assert started == NewEvent(JournalEvent.STEP_STARTED, "undo", {"nodeType": "connector"})


PREPARE, APPROVE = NODES[0], {"id": "approve", "type": "approval"}


@pytest.mark.parametrize(
    ("nodes", "decision"),
    [
        # a denial without onDeny fails the run: the replay writes that
        ([PREPARE, APPROVE, ACT], DENIED),
        # the approval is the last node: the run finishes
        ([PREPARE, APPROVE], RELEASED),
        # another approval, or a child run, comes next
        ([PREPARE, APPROVE, {"id": "again", "type": "approval"}], RELEASED),
        ([PREPARE, APPROVE, {"id": "child", "type": "workflow", "workflow": "w"}], RELEASED),
        # the graph no longer matches the journal (nondeterminism is the replay's to report)
        ([{**PREPARE, "id": "other"}, APPROVE, ACT], RELEASED),
    ],
)
def test_left_to_the_replay(nodes: list[dict[str, Any]], decision: Any) -> None:
    assert decided_approval(load_workflow("w", nodes, "nodes"), parked(*decision)) == []


def test_not_yet_decided_or_under_a_manual_takeover() -> None:
    workflow = load_workflow("w", NODES, "nodes")
    assert decided_approval(workflow, parked()) == []
    granted_only = RELEASED[:1]
    assert decided_approval(workflow, parked(*granted_only)) == []
    manual = (JournalEvent.TAKEOVER_REQUESTED, None, {"requestId": "tk2", "kind": "manual"})
    assert decided_approval(workflow, parked(manual, *RELEASED)) == []
