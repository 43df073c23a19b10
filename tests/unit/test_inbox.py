"""engine.domain.inbox.waits_for: what waits for a person's own decision (the console's queue
by default), read from the approver rules."""

from __future__ import annotations

import pytest

from engine.config import parse_config
from engine.domain.approvers import person_principal
from engine.domain.inbox import waits_for
from engine.domain.model import Principal, Role, TakeoverStatus, Vote
from tests.support.requests import NOW, takeover_request

CONFIG = parse_config(
    "people: {alice: {email: a@x.io}, bob: {email: b@x.io}, carol: {email: c@x.io}, "
    "dave: {email: d@x.io}}\n"
    "groups: {finance: [bob, carol]}\n"
    "admins: [alice]\n",
    {},
)


@pytest.mark.parametrize(
    ("who", "fields", "waits"),
    [
        ("bob", {}, True),  # one of its approvers
        ("carol", {"approvers": ()}, True),  # it names none: any approver's
        ("alice", {}, False),  # an admin could override: not her inbox
        ("alice", {"approvers": ("alice",)}, True),  # an admin asked by name
        ("bob", {"status": TakeoverStatus.DENIED}, False),  # decided
        ("bob", {"status": TakeoverStatus.GRANTED}, False),  # taken over
        ("bob", {"requested_by": "bob"}, False),  # his own run
        ("bob", {"votes": (Vote("bob", NOW),), "approvals_required": 2}, False),  # he approved
        ("carol", {"votes": (Vote("bob", NOW),), "approvals_required": 2}, True),
        ("dave", {}, False),  # in people:, not an approver of it
        ("erin", {"approvers": ()}, False),  # no longer in people:
    ],
)
def test_an_inbox_holds_what_waits_for_the_persons_own_decision(
    who: str, fields: dict[str, object], waits: bool
) -> None:
    principal = Principal(name=who, role=Role.APPROVER, person=who)
    if who in CONFIG.people:
        principal = person_principal(CONFIG, who)
    assert waits_for(CONFIG, takeover_request(**fields), principal) is waits


def test_an_agent_has_no_inbox() -> None:
    agent = Principal(name="token:bot", role=Role.AGENT, token="bot")
    assert not waits_for(CONFIG, takeover_request(approvers=()), agent)
