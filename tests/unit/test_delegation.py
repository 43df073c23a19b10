"""Delegates when someone is away (``engine.domain.delegation``), as tables: who may name one
and when; which absences route a new request, one hop only; the widened request and its
journal event; a delegate's grant counted as the absent approver's, once; and that a delegate
still decides under the groups in force. No database."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engine.config import parse_config
from engine.domain import decisions
from engine.domain.approvers import current_approvers, decision_refusal
from engine.domain.delegation import (
    DELEGATES,
    MAX_AWAY,
    Absence,
    absence_problem,
    away_refusal,
    delegated,
    delegates_for,
    delegation_events,
    seat,
    stand_in_map,
    widened,
)
from engine.domain.errors import DuplicateVote
from engine.domain.inbox import waits_for
from engine.domain.model import (
    JournalEntry,
    JournalEvent,
    Principal,
    Role,
    TakeoverRequest,
    TakeoverStatus,
)
from engine.domain.timeline import TimelineReader
from tests.support.requests import NOW, takeover_request

PEOPLE = ("alice", "bob", "carol", "dave")
LATER = NOW + timedelta(days=3)


def away(person: str, delegate: str, until: timedelta = timedelta(days=3)) -> Absence:
    return Absence(person, delegate, NOW + until, set_by=person, set_at=NOW)


@pytest.mark.parametrize(
    ("person", "delegate", "until", "problem"),
    [
        ("alice", "bob", timedelta(days=3), None),
        ("alice", "bob", MAX_AWAY, None),  # a year ahead exactly
        ("alice", "bob", MAX_AWAY + timedelta(seconds=1), "at most 365 days"),
        ("alice", "bob", timedelta(0), "must end in the future"),
        ("alice", "bob", -timedelta(days=1), "must end in the future"),
        ("alice", "alice", timedelta(days=3), "someone else"),
        ("alice", "mallory", timedelta(days=3), "the delegate mallory is not in people:"),
        ("mallory", "bob", timedelta(days=3), "mallory is not in people:"),
        ("alice", "finance", timedelta(days=3), "not in people:"),  # a group is no delegate
    ],
)
def test_who_may_be_away_and_until_when(
    person: str, delegate: str, until: timedelta, problem: str | None
) -> None:
    found = absence_problem(PEOPLE, person, delegate, NOW + until, NOW)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


ADMIN = Principal("alice", Role.ADMIN, person="alice")
BOB = Principal("bob", Role.APPROVER, person="bob")
AGENT = Principal("token:bot", Role.AGENT, token="bot")
TOKEN = Principal("token:ci", Role.APPROVER, token="ci")


@pytest.mark.parametrize(
    ("who", "person", "allowed"),
    [
        (BOB, "bob", True),  # one's own
        (BOB, "carol", False),  # someone else's
        (ADMIN, "carol", True),  # an admin: anyone's
        (ADMIN, "alice", True),
        (AGENT, "bob", False),  # agents: nobody's
        (TOKEN, "bob", False),  # a token tied to no person
    ],
)
def test_people_set_their_own_absence_and_admins_anyones(
    who: Principal, person: str, allowed: bool
) -> None:
    assert (away_refusal(who, person) is None) == allowed


@pytest.mark.parametrize(
    ("approvers", "absences", "requested_by", "routed"),
    [
        (("alice", "carol"), [away("alice", "bob")], "dave", {"alice": "bob"}),
        (("alice", "carol"), [], "dave", {}),
        # ended: the request goes to alice alone again
        (("alice", "carol"), [away("alice", "bob", -timedelta(seconds=1))], "dave", {}),
        (("alice", "carol"), [away("alice", "bob", timedelta(0))], "dave", {}),  # ends at until
        # someone not asked being away changes nothing
        (("carol",), [away("alice", "bob")], "dave", {}),
        # a delegate already asked is not asked twice (and gets no second seat)
        (("alice", "bob"), [away("alice", "bob")], "dave", {}),
        # a delegate never decides their own run
        (("alice", "carol"), [away("alice", "bob")], "bob", {}),
        # one hop: bob away too, handing to carol, does not forward alice's request to carol
        (("alice",), [away("alice", "bob"), away("bob", "carol")], "dave", {"alice": "bob"}),
        # both away: each to their own delegate, in the approvers' order
        (
            ("carol", "alice"),
            [away("alice", "bob"), away("carol", "dave")],
            None,
            {"carol": "dave", "alice": "bob"},
        ),
        # anyone may decide a request naming nobody: nobody to stand in for
        ((), [away("alice", "bob")], "dave", {}),
    ],
)
def test_which_absences_route_a_new_request(
    approvers: tuple[str, ...],
    absences: list[Absence],
    requested_by: str | None,
    routed: dict[str, str],
) -> None:
    chosen = delegates_for(approvers, absences, NOW, (requested_by,))
    assert stand_in_map(chosen) == routed
    assert list(stand_in_map(chosen)) == list(routed)  # order kept


def test_a_delegated_request_asks_the_delegate_and_journals_for_whom() -> None:
    chosen = delegates_for(("alice", "carol"), [away("alice", "bob")], NOW)
    request = delegated(takeover_request(approvers=("alice", "carol")), chosen)
    assert request.approvers == ("alice", "carol", "bob")
    assert widened(("alice", "carol"), chosen) == request.approvers
    until = LATER.isoformat()
    assert request.details[DELEGATES] == [{"for": "alice", "delegate": "bob", "until": until}]
    [event] = delegation_events(request)
    assert event.event == JournalEvent.TAKEOVER_DELEGATED
    assert event.step_id == "approve"
    assert event.data == {
        "requestId": "tk-1",
        DELEGATES: [{"for": "alice", "delegate": "bob", "until": until}],
    }
    assert seat(request, "bob") == "alice" and seat(request, "carol") == "carol"


def test_nobody_away_leaves_the_request_as_it_was() -> None:
    request = takeover_request(approvers=("alice", "carol"))
    assert delegated(request, {}) is request
    assert delegation_events(request) == []


def test_malformed_delegates_count_for_nobody_else() -> None:
    request = takeover_request(
        approvers=("alice", "bob"), details={DELEGATES: [{"for": 1, "delegate": "bob"}]}
    )
    assert seat(request, "bob") == "bob"
    assert delegation_events(request) == []


def _two_of_alice_and_carol() -> TakeoverRequest:
    chosen = delegates_for(("alice", "carol"), [away("alice", "bob")], NOW, ("dave",))
    base = takeover_request(approvers=("alice", "carol"), approvals_required=2, expires_at=LATER)
    return delegated(base, chosen)


@pytest.mark.parametrize(
    ("first", "second", "refusal"),
    [
        ("bob", "alice", "bob has already granted this request for alice"),
        ("alice", "bob", "alice has already granted this request, and bob decides for alice"),
        ("bob", "bob", "bob has already granted this request"),
    ],
)
def test_a_delegate_and_the_absent_approver_hold_one_seat(
    first: str, second: str, refusal: str
) -> None:
    request = _two_of_alice_and_carol()
    once = decisions.grant(request, first, NOW)
    assert once.status == TakeoverStatus.PENDING
    with pytest.raises(DuplicateVote) as raised:
        decisions.grant(once.request, second, NOW)
    assert raised.value.message == refusal


def test_the_delegates_grant_counts_as_the_absent_approvers_toward_the_quorum() -> None:
    request = _two_of_alice_and_carol()
    by_bob = decisions.grant(request, "bob", NOW)
    assert by_bob.events[0].data["for"] == "alice"
    assert by_bob.events[0].data["approvals"] == 1
    by_carol = decisions.grant(by_bob.request, "carol", NOW, release=True)
    assert by_carol.status == TakeoverStatus.RELEASED
    assert "for" not in by_carol.events[0].data
    assert by_carol.events[0].data["final"] is True


CONFIG = parse_config(
    """
people: {alice: {}, bob: {}, carol: {}, dave: {}}
groups: {finance: [alice, carol]}
""",
    {},
)
CONFIG_ALICE_LEFT = parse_config(
    """
people: {alice: {}, bob: {}, carol: {}, dave: {}}
groups: {finance: [carol]}
""",
    {},
)


def test_a_delegate_decides_while_the_absent_approver_still_would() -> None:
    chosen = delegates_for(("alice", "carol"), [away("alice", "bob")], NOW, ("dave",))
    base = takeover_request(
        approvers=("alice", "carol"), details={"approversAsWritten": ["finance"]}
    )
    request = delegated(base, chosen)
    assert current_approvers(CONFIG, request) == ("alice", "carol", "bob")
    assert decision_refusal(CONFIG, request, Principal("bob", Role.APPROVER, person="bob")) is None
    # alice left finance: bob no longer decides for her either
    assert current_approvers(CONFIG_ALICE_LEFT, request) == ("carol",)
    refusal = decision_refusal(CONFIG_ALICE_LEFT, request, BOB)
    assert refusal is not None and "no longer among" in refusal


def test_a_delegate_never_approves_their_own_run() -> None:
    # bob started the run: he is not asked for alice, and were he listed he is refused
    chosen = delegates_for(("alice", "carol"), [away("alice", "bob")], NOW, ("bob",))
    assert chosen == {}
    listed = delegated(
        takeover_request(approvers=("alice", "carol"), requested_by="bob"),
        {"alice": away("alice", "bob")},
    )
    assert decision_refusal(CONFIG, listed, BOB) == "you started this run, so you cannot approve it"


def test_an_approved_seat_leaves_both_inboxes() -> None:
    request = _two_of_alice_and_carol()
    alice = Principal("alice", Role.APPROVER, person="alice")
    carol = Principal("carol", Role.APPROVER, person="carol")
    assert all(waits_for(CONFIG, request, p) for p in (alice, BOB, carol))
    after = decisions.grant(request, "bob", NOW).request
    assert not waits_for(CONFIG, after, alice) and not waits_for(CONFIG, after, BOB)
    assert waits_for(CONFIG, after, carol)


def test_the_timeline_says_who_decides_for_whom() -> None:
    request = _two_of_alice_and_carol()
    [event] = delegation_events(request)
    entry = JournalEntry("run-1", 3, event.event, event.step_id, event.data, NOW)
    [item] = TimelineReader().read([entry])
    assert item.label == "Asked a delegate too"
    assert item.detail == "bob decides for alice, away until 2026-01-04 00:00 UTC"


def test_addresses_to_people_reach_the_delegate_after_the_one_away() -> None:
    away = {"alice": "bob"}
    channels = ["web", "slack:@finance", "teams:@alice", "slack:dm", "teams:@carol"]
    assert CONFIG.expand_channels(channels, ["alice", "carol", "bob"], away) == (
        "web",
        "slack:@alice",
        "slack:@bob",
        "slack:@carol",
        "teams:@alice",
        "teams:@bob",
        "teams:@carol",
    )
    assert CONFIG.expand_channels(channels, ["alice", "carol"]) == (
        "web",
        "slack:@alice",
        "slack:@carol",
        "teams:@alice",
        "teams:@carol",
    )
