"""engine.domain.approvers.may_see: who may see what a request asks (issue 29, item 13). The
approval page shows everyone else only that a request exists."""

from __future__ import annotations

from typing import Any

import pytest

from engine.domain.approvers import may_see
from engine.domain.model import Principal, Role, TakeoverRequest, Vote
from tests.support.requests import NOW, takeover_request


def person(name: str, role: Role = Role.APPROVER) -> Principal:
    return Principal(name=name, role=role, person=name)


def request(approvers: tuple[str, ...] = ("bob", "carol"), **fields: Any) -> TakeoverRequest:
    return takeover_request(approvers=approvers, **fields)


AGENT = Principal(name="token:bot", role=Role.AGENT, token="bot")
NO_PERSON = Principal(name="token:ops", role=Role.APPROVER, token="ops")
# A token whose name spells an approver's: tokens are named "token:<name>", never a person.
NAMED_LIKE_BOB = Principal(name="token:bob", role=Role.APPROVER, token="bob")

TABLE = [
    # (who, request, may see)
    (None, request(), False),  # nobody: a link preview, a mail scanner
    (person("bob"), request(), True),  # an approver
    (person("erin"), request(), False),  # a known person the request does not name
    (person("alice", Role.ADMIN), request(), True),  # an admin, named or not
    (person("dave"), request(), True),  # who started the run (sees it, cannot decide it)
    (AGENT, request(), False),  # no agent, not even the one that asked
    (NO_PERSON, request(), False),  # a token tied to no person, for a request naming people
    (NO_PERSON, request(approvers=()), True),  # a request any approver may decide
    (AGENT, request(approvers=()), False),
    (NAMED_LIKE_BOB, request(), False),
    (person("erin"), request(decided_by="erin"), True),  # decided it (an admin then)
    (person("erin"), request(released_by="erin"), True),
    (person("erin"), request(votes=(Vote("erin", NOW),)), True),
    (person("erin"), request(requested_by="token:bot"), False),
]


@pytest.mark.parametrize(("who", "asked", "expected"), TABLE)
def test_who_may_see_what_a_request_asks(
    who: Principal | None, asked: TakeoverRequest, expected: bool
) -> None:
    assert may_see(asked, who) is expected
