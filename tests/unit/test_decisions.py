"""The decision functions (``engine.domain.decisions``), as tables: every request status by
verdict by time against the deadline; every quorum by admin override; the events and card
messages each outcome carries. No database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engine.domain import decisions
from engine.domain.decisions import Outcome
from engine.domain.errors import AlreadyDecided, DuplicateVote, TransitionRefused
from engine.domain.model import (
    JournalEvent,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    TimeoutBehavior,
    Vote,
)

CREATED = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
DEADLINE = CREATED + timedelta(minutes=30)
WHEN = {
    "before": DEADLINE - timedelta(microseconds=1),
    "at": DEADLINE,  # the instant itself is too late
    "after": DEADLINE + timedelta(minutes=5),
}
ADMIN = {"override": "admin"}


def request(status: str = "pending", **fields: Any) -> TakeoverRequest:
    decided = status not in ("pending", "expired")
    values: dict[str, Any] = {
        "id": "tk-1",
        "run_id": "run-1",
        "step_id": "approve",
        "kind": TakeoverKind.NODE,
        "status": TakeoverStatus(status),
        "reason": "Refund 42",
        "created_at": CREATED,
        "expires_at": DEADLINE,
        "approvers": ("bob", "carol", "dave"),
        "channels": ("web", "slack:#ops"),
        "decided_by": "carol" if decided else None,
        "decided_at": CREATED + timedelta(minutes=1) if decided else None,
        "released_by": "carol" if status == "released" else None,
        **fields,
    }
    return TakeoverRequest(**values)


def decide(verdict: str, req: TakeoverRequest, now: datetime) -> Outcome | None:
    if verdict == "grant":
        return decisions.grant(req, "bob", now)
    if verdict == "grant+release":
        return decisions.grant(req, "bob", now, release=True)
    if verdict == "deny":
        return decisions.deny(req, "bob", now, notes="no")
    if verdict == "release":
        return decisions.release(req, "carol", now)
    if verdict == "expire":
        return decisions.expire(req, now)
    if verdict == "unreached":
        return decisions.unreached(req, now)
    assert verdict == "cancel"
    return decisions.cancel(req, "alice", now)


# (status, verdict) -> the result before / at / after the deadline: the new status, None
# (nothing to do), or the error raised.
STATUS_TABLE: list[tuple[str, str, Any, Any, Any]] = [
    ("pending", "grant", "granted", AlreadyDecided, AlreadyDecided),
    ("pending", "grant+release", "released", AlreadyDecided, AlreadyDecided),
    ("pending", "deny", "denied", AlreadyDecided, AlreadyDecided),
    ("pending", "release", TransitionRefused, TransitionRefused, TransitionRefused),
    ("pending", "expire", None, "expired", "expired"),
    ("pending", "cancel", "cancelled", "cancelled", "cancelled"),
    ("pending", "unreached", "cancelled", "cancelled", "cancelled"),
    ("granted", "grant", AlreadyDecided, AlreadyDecided, AlreadyDecided),
    ("granted", "grant+release", AlreadyDecided, AlreadyDecided, AlreadyDecided),
    ("granted", "deny", AlreadyDecided, AlreadyDecided, AlreadyDecided),
    ("granted", "release", "released", "released", "released"),
    ("granted", "expire", None, None, None),
    ("granted", "cancel", "cancelled", "cancelled", "cancelled"),
    ("granted", "unreached", "cancelled", "cancelled", "cancelled"),
]
for _ended in ("released", "denied", "expired", "cancelled"):
    STATUS_TABLE += [
        (_ended, "grant", AlreadyDecided, AlreadyDecided, AlreadyDecided),
        (_ended, "grant+release", AlreadyDecided, AlreadyDecided, AlreadyDecided),
        (_ended, "deny", AlreadyDecided, AlreadyDecided, AlreadyDecided),
        (_ended, "release", TransitionRefused, TransitionRefused, TransitionRefused),
        (_ended, "expire", None, None, None),
        (_ended, "cancel", None, None, None),
        (_ended, "unreached", None, None, None),
    ]


@pytest.mark.parametrize(
    ("status", "verdict", "when", "expected"),
    [
        (status, verdict, when, expected)
        for status, verdict, *by_time in STATUS_TABLE
        for when, expected in zip(WHEN, by_time, strict=True)
    ],
)
def test_status_verdict_and_deadline(status: str, verdict: str, when: str, expected: Any) -> None:
    req = request(status)
    if isinstance(expected, type):
        with pytest.raises(expected):
            decide(verdict, req, WHEN[when])
        return
    outcome = decide(verdict, req, WHEN[when])
    if expected is None:
        assert outcome is None
        return
    assert outcome is not None
    assert outcome.status == TakeoverStatus(expected)
    assert outcome.read_status == req.status  # the guard: still as read
    assert outcome.changes["status"] == TakeoverStatus(expected)


# A request needing ``required`` grants with ``counted`` already in, granted by bob (an admin
# override or not): the count it leaves, whether it decides, the status it leaves.
QUORUM_TABLE = [
    # required, counted, override, approvals, final, status
    (1, 0, None, 1, True, "granted"),
    (1, 0, ADMIN, 1, True, "granted"),
    (2, 0, None, 1, False, "pending"),
    (2, 0, ADMIN, 1, True, "granted"),
    (2, 1, None, 2, True, "granted"),
    (2, 1, ADMIN, 2, True, "granted"),
    (3, 0, None, 1, False, "pending"),
    (3, 0, ADMIN, 1, True, "granted"),
    (3, 1, None, 2, False, "pending"),
    (3, 1, ADMIN, 2, True, "granted"),
    (3, 2, None, 3, True, "granted"),
    (3, 2, ADMIN, 3, True, "granted"),
]
EARLIER = (Vote("carol", CREATED, None), Vote("dave", CREATED, "ok"))


@pytest.mark.parametrize("release", [False, True])
@pytest.mark.parametrize(
    ("required", "counted", "override", "approvals", "final", "status"), QUORUM_TABLE
)
def test_quorum_and_override(
    required: int,
    counted: int,
    override: dict[str, str] | None,
    approvals: int,
    final: bool,
    status: str,
    release: bool,
) -> None:
    req = request(approvals_required=required, votes=EARLIER[:counted])
    now = WHEN["before"]
    outcome = decisions.grant(req, "bob", now, notes="fine", release=release, override=override)
    expected = TakeoverStatus(status)
    if final and release:
        expected = TakeoverStatus.RELEASED
    assert outcome.status == expected
    assert outcome.read_approvals == counted  # the guard: no vote counted meanwhile
    assert outcome.changes["approvals"] == approvals
    assert outcome.vote == Vote("bob", now, "fine")
    assert [v.person for v in outcome.request.votes] == [*("carol", "dave")[:counted], "bob"]
    assert outcome.back_to_work == (final and release)
    granted = outcome.events[0]
    assert granted.event == JournalEvent.TAKEOVER_GRANTED
    assert granted.data == {
        "requestId": "tk-1",
        "by": "bob",
        "notes": "fine",
        "approvals": approvals,
        "approvalsRequired": required,
        "final": final,
        **(override or {}),
    }
    later = [e.event for e in outcome.events[1:]]
    if final and release:
        assert later == [JournalEvent.TAKEOVER_RELEASED, JournalEvent.RUN_RESUMED]
    else:
        assert later == []
    if final:
        assert outcome.request.decided_by == "bob" and outcome.request.decided_at == now
    else:
        assert "decided_by" not in outcome.changes
    if override:
        assert outcome.request.details["override"] == {"by": "bob", "override": "admin"}
    else:
        assert "details" not in outcome.changes


def test_a_second_grant_by_the_same_person_is_a_duplicate_vote() -> None:
    req = request(approvals_required=2, votes=(Vote("bob", CREATED, None),))
    with pytest.raises(DuplicateVote, match="bob has already granted this request"):
        decisions.grant(req, "bob", WHEN["before"])


@pytest.mark.parametrize(
    ("status", "when", "message"),
    [
        ("granted", "before", "request tk-1 is already granted (by carol)"),
        ("released", "after", "request tk-1 is already released (by carol)"),
        ("denied", "before", "request tk-1 is already denied (by carol)"),
        ("pending", "at", "request tk-1 is already expired"),
        ("expired", "after", "request tk-1 is already expired"),
    ],
)
def test_already_decided_says_what_and_by_whom(status: str, when: str, message: str) -> None:
    with pytest.raises(AlreadyDecided) as caught:
        decisions.grant(request(status), "bob", WHEN[when])
    assert caught.value.message == message


@pytest.mark.parametrize(("override", "extra"), [(None, {}), (ADMIN, ADMIN)])
def test_a_denial_journals_who_and_why(override: dict[str, str] | None, extra: Any) -> None:
    outcome = decisions.deny(request(), "bob", WHEN["before"], notes="no", override=override)
    (event,) = outcome.events
    assert event.event == JournalEvent.TAKEOVER_DENIED and event.step_id == "approve"
    assert event.data == {"requestId": "tk-1", "by": "bob", "notes": "no", **extra}
    assert outcome.back_to_work and outcome.vote is None
    assert outcome.request.notes == "no"


@pytest.mark.parametrize(
    ("person", "admin", "as_admin"),
    [("carol", False, False), ("carol", True, False), ("alice", True, True)],
)
def test_a_release_by_an_admin_not_the_taker_is_marked(
    person: str, admin: bool, as_admin: bool
) -> None:
    outcome = decisions.release(request("granted"), person, WHEN["after"], admin=admin)
    released, resumed = outcome.events
    assert released.data == {
        "requestId": "tk-1",
        "by": person,
        **({"asAdmin": True} if as_admin else {}),
    }
    assert resumed.event == JournalEvent.RUN_RESUMED and resumed.data == {"requestId": "tk-1"}
    assert outcome.request.released_by == person


@pytest.mark.parametrize("behavior", list(TimeoutBehavior))
def test_expiry_journals_the_behaviour_the_run_applies(behavior: TimeoutBehavior) -> None:
    outcome = decisions.expire(request(timeout_behavior=behavior), WHEN["at"])
    assert outcome is not None and outcome.back_to_work
    (event,) = outcome.events
    assert event.event == JournalEvent.TAKEOVER_EXPIRED
    assert event.data == {"requestId": "tk-1", "behavior": behavior.value}
    assert outcome.changes == {"status": TakeoverStatus.EXPIRED, "decided_at": WHEN["at"]}


def test_cancellation_journals_each_request_and_hands_nothing_back() -> None:
    outcome = decisions.cancel(request("granted"), "alice", WHEN["before"])
    assert outcome is not None and not outcome.back_to_work
    (event,) = outcome.events
    assert (event.event, event.data) == (JournalEvent.TAKEOVER_CANCELLED, {"requestId": "tk-1"})
    assert outcome.request.decided_by == "alice"


def test_a_request_the_run_never_reached_ends_with_it_saying_why() -> None:
    outcome = decisions.unreached(request("pending"), WHEN["before"])
    assert outcome is not None and not outcome.back_to_work
    (event,) = outcome.events
    note = "the run ended before it reached this step"
    assert (event.event, event.data) == (
        JournalEvent.TAKEOVER_CANCELLED,
        {"requestId": "tk-1", "notes": note},
    )
    assert outcome.request.notes == note and outcome.request.decided_by is None
    assert outcome.changes == {
        "status": TakeoverStatus.CANCELLED,
        "decided_at": WHEN["before"],
        "notes": note,
    }


@pytest.mark.parametrize("verdict", ["grant", "deny", "release", "expire", "cancel", "unreached"])
def test_the_card_changes_where_it_was_posted(verdict: str) -> None:
    status = "granted" if verdict == "release" else "pending"
    outcome = decide(verdict, request(status), WHEN["at" if verdict == "expire" else "before"])
    assert outcome is not None
    updates = [m for m in outcome.outbox if m.kind == "card_update"]
    assert [m.channel for m in updates] == ["slack:#ops"]  # the web card is read, not posted
    state = f"{outcome.status.value}:{len(outcome.request.votes)}"
    assert all(m.dedupe_key.endswith(state) for m in updates)


@pytest.mark.parametrize("status", [s.value for s in TakeoverStatus])
def test_an_answer_needs_a_granted_request_and_changes_nothing_else(status: str) -> None:
    req = request(status)
    if status != "granted":
        with pytest.raises(TransitionRefused, match="an answer needs a granted request"):
            decisions.answer(req, "v=0 answer")
        return
    outcome = decisions.answer(req, "v=0 answer")
    assert outcome.changes == {"sdp_answer": "v=0 answer"}
    assert outcome.read_status == TakeoverStatus.GRANTED and outcome.read_approvals is None
    assert outcome.request.sdp_answer == "v=0 answer"
    assert outcome.request.status == TakeoverStatus.GRANTED
    assert not outcome.events and not outcome.outbox and not outcome.back_to_work


# (status, escalate_at relative to now, approvers) -> the approvers after, or None (nothing).
SOON = WHEN["before"]
ESCALATION_TABLE: list[tuple[str, Any, tuple[str, ...], Any]] = [
    ("pending", None, ("bob",), None),  # nothing to escalate
    ("pending", timedelta(seconds=1), ("bob",), None),  # not due yet
    ("pending", timedelta(0), ("bob",), ("bob", "erin")),  # due now
    ("pending", -timedelta(minutes=5), ("bob", "erin"), ("bob", "erin")),  # each person once
    ("pending", -timedelta(minutes=5), (), ()),  # anyone may decide already: none named
    *((s, -timedelta(minutes=5), ("bob",), None) for s in ("granted", "denied", "released")),
    *((s, -timedelta(minutes=5), ("bob",), None) for s in ("expired", "cancelled")),
]


@pytest.mark.parametrize(("status", "due", "approvers", "after"), ESCALATION_TABLE)
def test_escalation_widens_a_pending_request_once(
    status: str, due: Any, approvers: tuple[str, ...], after: Any
) -> None:
    req = request(
        status,
        approvers=approvers,
        escalate_to=("erin",),
        escalate_at=None if due is None else SOON + due,
    )
    outcome = decisions.escalate(req, SOON)
    if after is None:
        assert outcome is None
        return
    assert outcome is not None and not outcome.back_to_work and not outcome.events
    assert outcome.request.approvers == after and outcome.request.escalate_at is None
    assert outcome.changes["escalate_at"] is None
    assert tuple(outcome.changes.get("approvers", ())) == after
    assert outcome.read_status == TakeoverStatus.PENDING
    (notice,) = outcome.outbox  # into slack:#ops; the page is read, not posted
    assert notice.payload["notice"] == "escalated" and notice.payload["people"] == ["erin"]


def test_a_request_past_its_deadline_does_not_escalate() -> None:
    req = request(escalate_to=("erin",), escalate_at=WHEN["before"])
    assert decisions.escalate(req, WHEN["after"]) is None
