"""A decision is allowed only under the configuration in force now (issue 29, item 8).

A request's approvers are fixed when it parks; a person removed from ``people:`` (and so from
every group) since then, by an edit and a restart, no longer decides it: not through a token, a
signed link, Slack, Teams or the web page, which all ask ``decision_refusal``."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from engine.config import AppConfig, parse_config
from engine.domain.approvers import (
    ADMIN_OVERRIDE,
    APPROVERS_AS_WRITTEN,
    approvers_as_written,
    current_approvers,
    decision_refusal,
    override_of,
    person_principal,
    token_principal,
)
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
    assert_refusal(config, req, who, verb, refused)


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


# -- asked through a group they have left since ------------------------------------------------

# bob leaves finance but stays in people:; ops (erin) is where the request escalates.
GROUPS_BEFORE = parse_config(
    "people: {alice: {email: a@x.io}, bob: {email: b@x.io}, carol: {email: c@x.io},"
    " erin: {email: e@x.io}}\n"
    "groups: {finance: [bob, carol], ops: [erin]}\n"
    "admins: [alice]\n",
    {},
)
BOB_LEFT_FINANCE = parse_config(
    "people: {alice: {email: a@x.io}, bob: {email: b@x.io}, carol: {email: c@x.io},"
    " erin: {email: e@x.io}}\n"
    "groups: {finance: [carol], ops: [erin]}\n"
    "admins: [alice]\n",
    {},
)
# bob, now an admin, left finance too: he decides, but as an admin (an override)
BOB_ADMIN_NOW = parse_config(
    "people: {alice: {email: a@x.io}, bob: {email: b@x.io}, carol: {email: c@x.io}}\n"
    "groups: {finance: [carol]}\n"
    "admins: [alice, bob]\n",
    {},
)


def written(
    names: list[str], approvers: tuple[str, ...], decided_by: str | None = None
) -> TakeoverRequest:
    """A request parked for ``names`` (as written), which expanded to ``approvers`` then."""
    asked = request(approvers, decided_by)
    return replace(asked, details={**asked.details, **approvers_as_written(names)})


FOR_FINANCE = written(["finance"], ("bob", "carol"))
FOR_FINANCE_TAKEN_BY_BOB = written(["finance"], ("bob", "carol"), decided_by="bob")
FOR_FINANCE_AND_BOB = written(["finance", "bob"], ("bob", "carol"))  # bob named himself too
ESCALATING = written(["finance", "ops"], ("bob", "carol"))  # escalateTo: [ops], not yet due
ESCALATED = written(["finance", "ops"], ("bob", "carol", "erin"))  # escalated: erin asked


@pytest.mark.parametrize(
    ("config", "req", "who", "verb", "refused"),
    [
        # before the edit bob decides through finance
        (GROUPS_BEFORE, FOR_FINANCE, "bob", "grant", None),
        (GROUPS_BEFORE, FOR_FINANCE, "bob", "deny", None),
        (GROUPS_BEFORE, FOR_FINANCE_TAKEN_BY_BOB, "bob", "release", None),
        # out of finance, still in people:, he no longer does, whatever the verb
        (BOB_LEFT_FINANCE, FOR_FINANCE, "bob", "grant", "bob is no longer among"),
        (BOB_LEFT_FINANCE, FOR_FINANCE, "bob", "takeover", "cannot take it over"),
        (BOB_LEFT_FINANCE, FOR_FINANCE, "bob", "deny", "(finance) under the configuration"),
        (BOB_LEFT_FINANCE, FOR_FINANCE_TAKEN_BY_BOB, "bob", "release", "cannot release it"),
        # carol, still in finance, decides; the admin overrides; named in person, bob stays
        (BOB_LEFT_FINANCE, FOR_FINANCE, "carol", "grant", None),
        (BOB_LEFT_FINANCE, FOR_FINANCE, "alice", "deny", None),
        (BOB_LEFT_FINANCE, FOR_FINANCE_TAKEN_BY_BOB, "alice", "release", None),
        (BOB_LEFT_FINANCE, FOR_FINANCE_AND_BOB, "bob", "grant", None),
        # those an escalation will ask decide once it has asked them, not before
        (BOB_LEFT_FINANCE, ESCALATING, "erin", "grant", "you are not an approver"),
        (BOB_LEFT_FINANCE, ESCALATED, "erin", "grant", None),
        (BOB_LEFT_FINANCE, ESCALATED, "bob", "grant", "bob is no longer among"),
        # a request parked before names were recorded keeps today's rule
        (BOB_LEFT_FINANCE, PARKED_FOR_FINANCE, "bob", "grant", None),
        # an admin now decides, as an admin
        (BOB_ADMIN_NOW, FOR_FINANCE, "bob", "grant", None),
    ],
)
def test_someone_asked_through_a_group_they_left_decides_no_longer(
    config: AppConfig, req: TakeoverRequest, who: str, verb: str, refused: str | None
) -> None:
    assert_refusal(config, req, who, verb, refused)


def test_who_decides_as_an_admin_after_leaving_the_group_is_journaled_as_an_override() -> None:
    bob = person_principal(BOB_ADMIN_NOW, "bob")
    carol = person_principal(BOB_ADMIN_NOW, "carol")
    assert current_approvers(BOB_ADMIN_NOW, FOR_FINANCE) == ("carol",)
    assert override_of(BOB_ADMIN_NOW, FOR_FINANCE, bob) == ADMIN_OVERRIDE
    assert override_of(BOB_ADMIN_NOW, FOR_FINANCE, carol) is None
    assert override_of(GROUPS_BEFORE, FOR_FINANCE, person_principal(GROUPS_BEFORE, "bob")) is None


def test_recorded_names_that_are_not_a_list_leave_only_admins() -> None:
    garbled = replace(FOR_FINANCE, details={APPROVERS_AS_WRITTEN: "finance"})
    assert current_approvers(GROUPS_BEFORE, garbled) == ()
    carol = person_principal(GROUPS_BEFORE, "carol")
    assert decision_refusal(GROUPS_BEFORE, garbled, carol) is not None
    assert (
        decision_refusal(GROUPS_BEFORE, garbled, person_principal(GROUPS_BEFORE, "alice")) is None
    )


def assert_refusal(
    config: AppConfig, req: TakeoverRequest, who: str, verb: str, refused: str | None
) -> None:
    """``who`` is refused ``verb`` on ``req`` with a sentence holding ``refused`` (None: allowed),
    as a token (REST API, console) and as a person (chat, signed link) alike."""
    role = Role.ADMIN if who in config.admins else Role.APPROVER
    for principal in (via_token(config, who, role), person_principal(config, who)):
        said = decision_refusal(config, req, principal, verb)
        if refused is None:
            assert said is None, (principal, said)
        else:
            assert said is not None and refused in said, (principal, said)
