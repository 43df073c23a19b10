"""``replay.Replay``, the one walk of a graph against its journal: completed steps are skipped
along the branch they took, the first step without ``step_completed`` is where execution
starts, and a journal that started another step at some point raises the nondeterminism
error (the interpreter fails the run; ``decided_approval`` leaves it to the replay)."""

from __future__ import annotations

import pytest

from engine.config.workflows import load_workflow
from engine.domain.errors import NondeterminismError
from engine.domain.model import JournalEvent
from engine.domain.replay import JournalIndex, Replay, decided_approval
from tests.unit.test_decided_approval import DENIED, NODES, RELEASED, journal, parked

WORKFLOW = load_workflow("w", NODES, "nodes")


def skipped(replay: Replay) -> list[str]:
    """Walk past every completed step; the ids skipped."""
    ids = []
    while replay.node is not None:
        _, completed = replay.visit()
        if completed is None:
            break
        ids.append(replay.node.id)
        replay.follow(completed.data.get("branch"))
    return ids


def test_completed_steps_are_skipped_up_to_the_first_not_done() -> None:
    replay = Replay(WORKFLOW, JournalIndex(parked(*RELEASED)), "r1")
    assert skipped(replay) == ["prepare"]
    assert replay.node is not None and replay.node.id == "approve"


def test_a_recorded_branch_is_followed() -> None:
    events = parked(*DENIED)
    completed = (JournalEvent.STEP_COMPLETED, "approve", {"output": {}, "branch": "onDeny"})
    rows = [(e.event, e.step_id, e.data) for e in events] + [completed]
    replay = Replay(WORKFLOW, JournalIndex(journal(*rows)), "r1")
    assert skipped(replay) == ["prepare", "approve"]
    assert replay.node is not None and replay.node.id == "undo"  # not act


def test_a_journal_that_started_another_step_is_nondeterminism() -> None:
    rows = [(e.event, e.step_id, e.data) for e in parked(*RELEASED)]
    rows[1] = (JournalEvent.STEP_STARTED, "renamed", {"nodeType": "connector"})
    replay = Replay(WORKFLOW, JournalIndex(journal(*rows)), "r1")
    with pytest.raises(NondeterminismError) as caught:
        skipped(replay)
    assert "'renamed'" in caught.value.message and "'prepare'" in caught.value.message
    assert caught.value.fields == {"run_id": "r1"}
    assert decided_approval(WORKFLOW, journal(*rows)) == []  # the same walk, left to replay


def test_another_node_type_at_that_point_is_nondeterminism() -> None:
    rows = [(e.event, e.step_id, e.data) for e in parked(*RELEASED)]
    rows[3] = (JournalEvent.STEP_STARTED, "approve", {"nodeType": "connector"})
    with pytest.raises(NondeterminismError):
        skipped(Replay(WORKFLOW, JournalIndex(journal(*rows))))
