"""engine.domain.approvers: the one home of who is acting and who may decide."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.config import parse_config
from engine.domain.approvers import (
    acting_agent,
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


def test_an_admin_token_acts_as_admin_only_while_listed() -> None:
    def token(person: str | None) -> ApiToken:
        return ApiToken("t", Role.ADMIN, person, NOW)

    assert token_principal(CONFIG, token("alice")).role == Role.ADMIN
    assert token_principal(CONFIG, token("carol")).role == Role.APPROVER
    assert token_principal(CONFIG, token(None)).role == Role.APPROVER
    assert person_principal(CONFIG, "alice").is_admin
    assert not person_principal(CONFIG, "bob").is_admin
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
