"""A decision notice, read once for every channel: from the payload the engine queued (status,
vote count, "taken over"), never from the outbox dedupe key."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cards.notice_fields import decision_fields, queued_decision
from cards.samples import sample_request, sample_view
from engine.domain import notify
from engine.domain.model import OutboxMessage, TakeoverStatus


def _decision_payload(messages: list[OutboxMessage]) -> dict[str, object]:
    (notice,) = [m for m in messages if m.kind == "notice"]
    return dict(notice.payload)


def test_card_changed_carries_status_and_votes_and_keeps_its_dedupe_key() -> None:
    request = replace(sample_request("pending"), channels=("slack:C1", "web"))
    messages = notify.card_changed(request)
    assert [m.dedupe_key for m in messages] == [
        "update:tk_7f3a9c:slack:C1:pending:1",
        "notice:decision:tk_7f3a9c:slack:C1:pending:1",
    ]
    assert _decision_payload(messages) == {
        "notice": "decision",
        "requestId": "tk_7f3a9c",
        "status": "pending",
        "votes": 1,
    }


def test_a_hand_back_says_taken_over_and_an_expiry_carries_no_decision() -> None:
    released = replace(sample_request("released"), channels=("teams:ops",))
    assert _decision_payload(notify.card_handed_back(released))["takenOver"] is True
    assert "takenOver" not in _decision_payload(notify.card_changed(released))
    expired = replace(sample_request("expired"), channels=("teams:ops",))
    assert _decision_payload(notify.card_changed(expired)) == {
        "notice": "expired",
        "requestId": "tk_7f3a9c",
    }


@pytest.mark.parametrize(
    ("state", "payload", "verb", "actor", "quorum"),
    [
        # the first of two votes: alice's vote, the quorum incomplete
        ("pending", {"status": "pending", "votes": 1}, "grant", "alice", "1 of 2 approvals"),
        # queued for the first vote, delivered after the second: still the first vote
        ("released", {"status": "pending", "votes": 1}, "grant", "alice", "1 of 2 approvals"),
        ("released", {"status": "released", "votes": 2}, "grant", "bob", "2 of 2 approvals"),
        ("released", {"status": "released", "votes": 2, "takenOver": True}, "release", "bob", None),
        ("granted", {"status": "granted", "votes": 1}, "takeover", "bob", None),
        ("denied", {"status": "denied", "votes": 1}, "deny", "bob", None),
        ("cancelled", {"status": "cancelled", "votes": 1}, "cancel", "dave", None),
        # a row queued before status and votes travelled: the request as it is
        ("denied", {}, "deny", "bob", None),
    ],
)
def test_decision_fields_describe_the_queued_decision(
    state: str, payload: dict[str, object], verb: str, actor: str, quorum: str | None
) -> None:
    request = sample_request(state)
    fields = decision_fields(request, sample_view(state), {"requestId": request.id, **payload})
    assert (fields["verb"], fields["actor"], fields["quorum"]) == (verb, actor, quorum)


def test_a_release_by_someone_else_is_a_hand_back_without_the_flag() -> None:
    request = replace(sample_request("released"), released_by="erin")
    status, votes, taken_over = queued_decision(request, {"status": "released", "votes": 2})
    assert (status, votes, taken_over) == (TakeoverStatus.RELEASED, 2, False)
    fields = decision_fields(request, sample_view("released"), {"status": "released", "votes": 2})
    assert (fields["verb"], fields["actor"]) == ("release", "erin")
