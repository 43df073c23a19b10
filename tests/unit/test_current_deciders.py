"""A decision is allowed only under the configuration in force now (issue 29, item 8).

A request's approvers are fixed when it parks; a person removed from ``people:`` (and so from
every group) since then, by an edit and a restart, no longer decides it: not through a token, a
signed link, Slack, Teams or the web page, which all ask ``decision_refusal``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.config import AppConfig, parse_config
from engine.domain.approvers import decision_refusal, person_principal, token_principal
from engine.domain.model import (
    ApiToken,
    Principal,
    Role,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)

BEFORE = parse_config(
    "people: {alice: {email: a@x.io}, bob: {email: b@x.io}, carol: {email: c@x.io}}\n"
    "groups: {finance: [bob, carol]}\n"
    "admins: [alice]\n",
    {},
)
# bob left: out of people: and so out of finance (a group names people only).
AFTER = parse_config(
    "people: {alice: {email: a@x.io}, carol: {email: c@x.io}}\n"
    "groups: {finance: [carol]}\n"
    "admins: [alice]\n",
    {},
)


def request(approvers: tuple[str, ...], decided_by: str | None = None) -> TakeoverRequest:
    return TakeoverRequest(
        id="r1",
        run_id="run1",
        step_id="s",
        kind=TakeoverKind.NODE,
        status=TakeoverStatus.PENDING if decided_by is None else TakeoverStatus.GRANTED,
        reason="pay",
        created_at=NOW,
        expires_at=NOW + timedelta(hours=1),
        approvers=approvers,
        requested_by="dave",
        decided_by=decided_by,
    )


def via_token(config: AppConfig, person: str, role: Role = Role.APPROVER) -> Principal:
    return token_principal(config, ApiToken(f"{person}-token", role, person, NOW))


PARKED_FOR_BOB = request(("bob",))
PARKED_FOR_FINANCE = request(("bob", "carol"))  # finance, expanded when it parked
PARKED_FOR_ANYONE = request(())
TAKEN_BY_BOB = request(("bob",), decided_by="bob")


@pytest.mark.parametrize(
    ("config", "req", "who", "verb", "refused"),
    [
        # before the edit bob decides, every way he can
        (BEFORE, PARKED_FOR_BOB, "bob", "grant", None),
        (BEFORE, PARKED_FOR_BOB, "bob", "deny", None),
        (BEFORE, PARKED_FOR_ANYONE, "bob", "grant", None),
        (BEFORE, TAKEN_BY_BOB, "bob", "release", None),
        # after it, not at all
        (AFTER, PARKED_FOR_BOB, "bob", "grant", "bob is no longer in people:"),
        (AFTER, PARKED_FOR_BOB, "bob", "takeover", "cannot take it over"),
        (AFTER, PARKED_FOR_BOB, "bob", "deny", "cannot deny it"),
        (AFTER, PARKED_FOR_FINANCE, "bob", "grant", "bob is no longer in people:"),
        (AFTER, PARKED_FOR_ANYONE, "bob", "grant", "bob is no longer in people:"),
        (AFTER, TAKEN_BY_BOB, "bob", "release", "cannot release it"),
        # those still listed keep deciding; an admin now overrides as before
        (AFTER, PARKED_FOR_FINANCE, "carol", "grant", None),
        (AFTER, PARKED_FOR_BOB, "carol", "grant", "you are not an approver"),
        (AFTER, PARKED_FOR_BOB, "alice", "grant", None),
        (AFTER, TAKEN_BY_BOB, "alice", "release", None),
    ],
)
def test_only_who_may_decide_under_the_config_in_force_now_decides(
    config: AppConfig, req: TakeoverRequest, who: str, verb: str, refused: str | None
) -> None:
    # a token (REST API, console) and a person (chat, signed link) are held to the same rule
    role = Role.ADMIN if who in config.admins else Role.APPROVER
    for principal in (via_token(config, who, role), person_principal(config, who)):
        said = decision_refusal(config, req, principal, verb)
        if refused is None:
            assert said is None, (principal, said)
        else:
            assert said is not None and refused in said, (principal, said)


def test_an_admin_removed_from_admins_decides_only_what_they_were_asked() -> None:
    demoted = parse_config(
        "people: {alice: {email: a@x.io}, carol: {email: c@x.io}}\nadmins: [carol]\n", {}
    )
    alice = via_token(demoted, "alice", Role.ADMIN)  # an admin token minted before the edit
    assert not alice.is_admin
    assert (
        decision_refusal(demoted, PARKED_FOR_BOB, alice)
        == "you are not an approver for this request"
    )
    assert decision_refusal(demoted, request(("alice",)), alice) is None
