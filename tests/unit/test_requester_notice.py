"""The person who asked is told how their request ended: where (fixed from the configuration
when the request is made, ``engine.config.channels.requester``), and what the decision queues
for them (``engine.domain.notify.card_changed``): the decision's own notice in a shared place,
mentioning them; that notice alone in their own chat when the card is not there; nothing to
whoever ended it themselves, nothing before it ends, nothing new when queued again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cards.notice_fields import request_notice_fields
from cards.notices import NoticeKind
from cards.samples import sample_request, sample_view
from engine.config import parse_config
from engine.config.channels.requester import requester_channels
from engine.domain import notify
from engine.domain.model import OutboxMessage, TakeoverRequest, TakeoverStatus

CONFIG = parse_config(
    """
people:
  carol: {email: carol@example.com, slack: U0CAROL01, teams: aad-carol}
  dave: {email: dave@example.com}
  erin: {teams: aad-erin}
  bob: {slack: U0BOB0001}
webhooks:
  audit: {url: "https://hooks.example.com/audit", secret: "0123456789abcdef0123456789abcdef"}
""",
    {},
)


@pytest.mark.parametrize(
    ("channels", "who", "told"),
    [
        # a shared place of each kind: the first one, where the card is
        (["slack:C0ONE", "slack:C0TWO", "teams:ops"], "carol", ["slack:C0ONE", "teams:ops"]),
        # only personal chats of a kind: the requester's own chat there
        (["slack:@bob", "teams:@erin"], "carol", ["slack:@carol", "teams:@carol"]),
        # ... unless the channel cannot find them: dave has an email (Slack looks it up), no
        # Teams id
        (["slack:@bob", "teams:@erin"], "dave", ["slack:@dave"]),
        (["teams:@erin"], "bob", []),
        # a shared place where the kind has personal chats too: told once, in the shared place
        (["slack:@bob", "slack:C0ONE"], "carol", ["slack:C0ONE"]),
        # already one of the personal chats (an approver): that same chat
        (["slack:@carol", "slack:@bob"], "carol", ["slack:@carol"]),
        # the approval page and webhooks reach no person: nobody is told there
        (["web", "webhook:audit"], "carol", []),
        # an agent's token without a person, someone not in people:, nobody
        (["slack:C0ONE"], "token:agent", []),
        (["slack:C0ONE"], "mallory", []),
        (["slack:C0ONE"], None, []),
    ],
)
def test_where_the_requester_is_told(channels: list[str], who: str | None, told: list[str]) -> None:
    assert list(requester_channels(channels, who, CONFIG.people)) == told
    assert list(CONFIG.requester_channels(channels, who)) == told


def _request(status: str, channels: tuple[str, ...], told: tuple[str, ...]) -> TakeoverRequest:
    request = replace(sample_request(status), channels=channels)  # carol started the run
    return notify.with_requester(request, told)


def _notices(messages: list[OutboxMessage]) -> dict[str, dict[str, Any]]:
    return {m.channel: dict(m.payload) for m in messages if m.kind == "notice"}


def test_a_shared_place_gets_one_notice_mentioning_the_requester() -> None:
    request = _request("released", ("slack:C0ONE", "slack:C0TWO", "web"), ("slack:C0ONE",))
    messages = notify.card_changed(request)
    assert [m.kind for m in messages] == ["card_update", "notice"] * 2  # no second message
    notices = _notices(messages)
    assert notices["slack:C0ONE"]["requester"] == "carol"
    assert "requester" not in notices["slack:C0TWO"]
    # The dedupe keys keep their shape: a retried transaction queues nothing new.
    assert [m.dedupe_key for m in messages] == [
        m.dedupe_key for m in notify.card_changed(replace(request, details={}))
    ]


def test_their_own_chat_gets_the_notice_alone_when_the_card_is_not_there() -> None:
    request = _request("denied", ("slack:@bob",), ("slack:@carol",))
    messages = notify.card_changed(request)
    assert [(m.channel, m.kind) for m in messages] == [
        ("slack:@bob", "card_update"),
        ("slack:@bob", "notice"),
        ("slack:@carol", "notice"),
    ]
    own = messages[-1]
    assert own.payload == {
        "notice": "decision",
        "requestId": request.id,
        "status": "denied",
        "votes": 1,
        "requester": "carol",
    }
    assert own.dedupe_key == f"notice:decision:{request.id}:slack:@carol:denied:1"
    assert (own.run_id, own.request_id) == (request.run_id, request.id)
    assert "requester" not in messages[1].payload


def test_an_expiry_is_told_too() -> None:
    request = _request("expired", ("teams:@bob",), ("teams:@carol",))
    own = notify.card_changed(request)[-1]
    assert (own.channel, own.payload) == (
        "teams:@carol",
        {"notice": "expired", "requestId": request.id, "requester": "carol"},
    )


@pytest.mark.parametrize(
    ("status", "changes"),
    [
        ("pending", {}),  # one vote of two: it has not ended
        ("granted", {}),  # taken over: not ended either
        ("cancelled", {}),  # cancelled with its run: the run's own end says so
        ("released", {"released_by": "carol"}),  # carol released it herself
        ("denied", {"decided_by": "carol"}),  # carol denied it herself
    ],
)
def test_nobody_is_told_before_the_end_nor_what_they_did_themselves(
    status: str, changes: dict[str, Any]
) -> None:
    request = replace(_request(status, ("slack:@bob",), ("slack:@carol",)), **changes)
    assert notify.requester(request) is None
    assert [m.channel for m in notify.card_changed(request)] == ["slack:@bob"] * 2


def test_a_request_nobody_is_told_of_keeps_its_details() -> None:
    request = replace(sample_request("released"), channels=("slack:C0ONE",))
    assert notify.with_requester(request, ()) is request
    anonymous = replace(request, requested_by=None)
    assert notify.with_requester(anonymous, ("slack:C0ONE",)) is anonymous


def test_malformed_details_tell_nobody() -> None:
    request = replace(sample_request("released"), channels=("slack:C0ONE",))
    for bad in ("carol", {"person": "carol"}, {"person": 7, "channels": ["slack:C0ONE"]}):
        broken = replace(request, details={**request.details, notify.REQUESTER: bad})
        assert notify.requester(broken) is None


@pytest.mark.parametrize(
    ("status", "notice"), [("released", "decision"), ("denied", "decision"), ("expired", "expired")]
)
def test_the_fields_mention_the_requester_as_the_channel_does(status: str, notice: str) -> None:
    request = _request(status, ("slack:C0ONE",), ("slack:C0ONE",))
    (payload,) = [m.payload for m in notify.card_changed(request) if m.kind == "notice"]
    fields = request_notice_fields(
        NoticeKind(notice),
        request,
        sample_view(status),
        payload,
        lambda people: [f"<{p}>" for p in people],
    )
    assert fields["requester"] == "<carol>"
    # A channel that cannot mention them (no id for them there) leaves it out.
    assert "requester" not in request_notice_fields(
        NoticeKind(notice), request, sample_view(status), payload, lambda people: []
    )


def test_only_an_end_is_told() -> None:
    assert {s for s in TakeoverStatus if notify.requester(_request(s.value, (), ("a:b",)))} == {
        TakeoverStatus.RELEASED,
        TakeoverStatus.DENIED,
        TakeoverStatus.EXPIRED,
    }
