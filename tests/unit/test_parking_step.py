"""``replay.parking_step``: the step an operator's takeover without ``stepId`` parks a run
before, foreseen from the journal as it stood when the request was journaled (the API answers
it as the request's ``stepId``)."""

from __future__ import annotations

from typing import Any

from engine.config.workflows import load_workflow
from engine.domain.model import JournalEvent
from engine.domain.replay import parking_step
from tests.unit.test_decided_approval import DENIED, NODES, RELEASED, journal, parked

WORKFLOW = load_workflow("w", NODES, "nodes")  # prepare, approve (onDeny: undo), act, undo
MANUAL = (JournalEvent.TAKEOVER_REQUESTED, None, {"requestId": "tk9", "kind": "manual"})
STARTED = JournalEvent.STEP_STARTED
COMPLETED = JournalEvent.STEP_COMPLETED


def requested_after(*rows: tuple[JournalEvent, str | None, dict[str, Any]]) -> str | None:
    """Where a takeover journaled right after ``rows`` parks the run; later rows are ignored."""
    events = journal(*rows, MANUAL, (STARTED, "prepare", {"nodeType": "connector"}))
    return parking_step(WORKFLOW, events, requested_at=len(rows) + 1)


def test_a_run_not_started_parks_before_its_first_step() -> None:
    assert requested_after() == "prepare"
    assert requested_after((JournalEvent.RUN_STARTED, None, {})) == "prepare"


def test_a_step_under_way_goes_on_and_the_run_parks_before_the_next() -> None:
    under_way = (STARTED, "prepare", {"nodeType": "connector"})
    assert requested_after((JournalEvent.RUN_STARTED, None, {}), under_way) == "approve"


def test_a_decided_approval_is_followed_along_its_branch() -> None:
    rows = [(e.event, e.step_id, e.data) for e in parked(*RELEASED)]
    assert requested_after(*rows) == "act"
    rows = [(e.event, e.step_id, e.data) for e in parked(*DENIED)]
    assert requested_after(*rows) == "undo"
    done = (COMPLETED, "approve", {"output": {}, "branch": "onDeny"})
    assert requested_after(*rows, done) == "undo"


def test_nothing_left_to_park_before_is_none() -> None:
    rows = [(e.event, e.step_id, e.data) for e in parked(*DENIED)]
    last = [*rows, (COMPLETED, "approve", {"output": {}, "branch": "onDeny"})]
    last.append((STARTED, "undo", {"nodeType": "connector"}))
    assert requested_after(*last) is None  # undo under way is the last step
    no_deny = load_workflow("w", [NODES[0], {"id": "approve", "type": "approval"}], "nodes")
    events = journal(*rows, MANUAL)
    assert parking_step(no_deny, events, requested_at=len(rows) + 1) is None  # denial fails it


def test_a_journal_that_does_not_match_the_graph_is_left_to_the_replay() -> None:
    renamed = (STARTED, "renamed", {"nodeType": "connector"})
    assert requested_after((JournalEvent.RUN_STARTED, None, {}), renamed) is None
