"""engine.domain.approvers: the one home of who is acting and who may decide."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.config import parse_config
from engine.domain.approvers import (
    acting_agent,
    acting_role,
    admin_refusal,
    admin_token_problem,
    agent_layers,
    person_principal,
    run_deciders,
    token_principal,
)
from engine.domain.errors import Forbidden
from engine.domain.model import ApiToken, Principal, Role

CONFIG = parse_config(
    "people: {alice: {email: a@x.io}, bob: {email: b@x.io}, carol: {email: c@x.io}}\n"
    "groups: {finance: [bob, carol]}\n"
    "admins: [alice]\n"
    "approvers: [finance]\n"
    "workflows:\n"
    "  pay: {nodes: [{id: a, type: approval, approvers: [bob]}]}\n"
    "  open: {nodes: [{id: a, type: approval}]}\n",
    {},
)
AGENT = Principal(name="token:bot", role=Role.AGENT, token="bot")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_acting_agent_is_the_tokens_and_may_only_narrow() -> None:
    assert acting_agent(AGENT, None) == "bot" and acting_agent(AGENT, "") == "bot"
    assert acting_agent(AGENT, "bot") == "bot"
    assert acting_agent(AGENT, "bot/refunds") == "bot/refunds"
    for other in ("trusted-bot", "bo", "bot/", "botx/y", "other/bot"):
        with pytest.raises(Forbidden, match="not this token's agent"):
            acting_agent(AGENT, other)
    chat = person_principal(CONFIG, "bob")  # no token: no agent to narrow
    assert acting_agent(chat, None) is None
    with pytest.raises(Forbidden, match="only an API token"):
        acting_agent(chat, "bot")


def test_a_sub_agent_gets_its_tokens_settings_first() -> None:
    assert agent_layers("bot") == ("bot",)
    assert agent_layers("bot/refunds") == ("bot", "bot/refunds")


@pytest.mark.parametrize(
    ("role", "person", "acts_as"),
    [
        # a person listed in admins: is an admin through any credential bound to them
        (Role.ADMIN, "alice", Role.ADMIN),
        (Role.APPROVER, "alice", Role.ADMIN),
        # a person not listed is not, whatever the token says (removed since it was made)
        (Role.ADMIN, "carol", Role.APPROVER),
        (Role.APPROVER, "carol", Role.APPROVER),
        # an admin is a person: a token bound to nobody is no admin's
        (Role.ADMIN, None, Role.APPROVER),
        (Role.APPROVER, None, Role.APPROVER),
        # an agent stays an agent, also one acting for an admin
        (Role.AGENT, "alice", Role.AGENT),
        (Role.AGENT, None, Role.AGENT),
    ],
)
def test_admins_listed_act_as_admins_through_any_of_their_tokens(
    role: Role, person: str | None, acts_as: Role
) -> None:
    assert acting_role(CONFIG, role, person) == acts_as
    assert token_principal(CONFIG, ApiToken("t", role, person, NOW)).role == acts_as
    assert (admin_refusal(CONFIG, role, person) is None) == (acts_as == Role.ADMIN)


def test_a_person_in_chat_or_on_a_link_is_an_admin_when_listed() -> None:
    assert person_principal(CONFIG, "alice").is_admin
    assert not person_principal(CONFIG, "bob").is_admin


@pytest.mark.parametrize(
    ("role", "person", "said"),
    [
        (
            Role.APPROVER,
            "carol",
            "carol's token is an approver token and carol is not listed in admins:",
        ),
        (
            Role.ADMIN,
            "carol",
            "carol's token is an admin token, but carol is not listed in admins:",
        ),
        (
            Role.APPROVER,
            None,
            "this approver token names no person, and only people listed in admins: act as admins",
        ),
        (
            Role.ADMIN,
            None,
            "this admin token names no person, and only people listed in admins: act as admins",
        ),
        (Role.AGENT, "alice", "this is an agent token, and agent tokens never act as admins"),
    ],
)
def test_why_a_token_is_no_admin_says_what_is_the_case(
    role: Role, person: str | None, said: str
) -> None:
    assert admin_refusal(CONFIG, role, person) == said


def test_an_admin_token_is_made_only_for_someone_listed() -> None:
    assert admin_token_problem(CONFIG, "alice") is None
    assert admin_token_problem(CONFIG, "carol") == (
        "--person 'carol' is not in admins: (admins: alice)"
    )
    assert admin_token_problem(CONFIG, None) is not None


def test_a_runs_deciders_come_from_its_workflow_else_the_project() -> None:
    assert run_deciders(CONFIG, CONFIG.workflows["pay"]) == ("bob",)
    assert run_deciders(CONFIG, CONFIG.workflows["open"]) == ("bob", "carol")
    nobody = parse_config("people: {bob: {email: b@x.io}}\n", {})
    assert run_deciders(nobody, None) is None  # nothing names anyone: any approver
