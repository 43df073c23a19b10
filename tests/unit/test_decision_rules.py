"""The rules the SQL store applies, on their own: when a request expires, when grants decide
it, who decides once it escalates, what a cancellation ends and journals. The store applies the
comparisons to its columns too: the same functions give its SQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import column

from engine.domain.approvers import escalated_approvers
from engine.domain.cancellation import (
    CHILDREN_CANCELLED,
    REQUESTS_CANCELLED,
    run_cancelled,
)
from engine.domain.expiry import expiry_data, has_expired, status_at, still_open
from engine.domain.model import (
    JournalEvent,
    RunStatus,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
)
from engine.domain.quorum import forced_by_override, grant_decides, quorum_met

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def request(**changes: object) -> TakeoverRequest:
    fields: dict[str, object] = {
        "id": "tk-1",
        "run_id": "run-1",
        "step_id": "approve",
        "kind": TakeoverKind.NODE,
        "status": TakeoverStatus.PENDING,
        "reason": "Pay 10",
        "created_at": T0,
        "expires_at": T0 + timedelta(minutes=30),
    }
    return TakeoverRequest(**(fields | changes))  # type: ignore[arg-type]


def test_a_request_expires_at_its_instant() -> None:
    at = T0 + timedelta(minutes=30)
    assert still_open(at, at - timedelta(microseconds=1))
    assert has_expired(at, at) and not still_open(at, at)
    assert status_at(request(), at) == TakeoverStatus.EXPIRED
    assert status_at(request(), T0) == TakeoverStatus.PENDING
    granted = request(status=TakeoverStatus.GRANTED)
    assert status_at(granted, at + timedelta(days=1)) == TakeoverStatus.GRANTED


def test_the_same_rules_as_sql() -> None:
    sql = str(has_expired(column("expires_at"), column("now")))
    assert sql == "expires_at <= now"
    assert str(quorum_met(column("approvals") + 1, column("approvals_required"))) == (
        "approvals + :approvals_1 >= approvals_required"
    )
    assert expiry_data("tk-1", "auto-reject") == {"requestId": "tk-1", "behavior": "auto-reject"}


def test_quorum_and_override() -> None:
    assert not grant_decides(1, 2, False) and grant_decides(2, 2, False)
    assert grant_decides(1, 2, True)
    assert forced_by_override(1, 2, True)
    assert not forced_by_override(2, 2, True) and not forced_by_override(1, 2, False)


def test_escalation_widens_named_approvers_only() -> None:
    named = request(approvers=("bob", "carol"), escalate_to=("carol", "dave"))
    assert escalated_approvers(named) == ("bob", "carol", "dave")
    assert escalated_approvers(request(escalate_to=("dave",))) is None


def test_what_a_cancellation_ends_and_journals() -> None:
    assert CHILDREN_CANCELLED == {RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING}
    assert REQUESTS_CANCELLED == {TakeoverStatus.PENDING, TakeoverStatus.GRANTED}
    event = run_cancelled("alice")
    assert (event.event, event.step_id, event.data) == (
        JournalEvent.RUN_CANCELLED,
        None,
        {"by": "alice"},
    )
