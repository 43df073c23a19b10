"""``plan_reload``: what a reload applies (people, groups, admins, approvers: together), what it
reports for a restart, and what it refuses, without a database or a server."""

from __future__ import annotations

import dataclasses

import pytest

from engine.config import parse_config
from engine.config.reloading import plan_reload, sections_of
from engine.domain.errors import ConfigError

BASE = """\
server: {workers: 4}
people:
  alice: {email: alice@example.com, slack: U0ALICE01}
  bob: {email: bob@example.com}
groups: {finance: [alice, bob]}
admins: [alice]
gate: {approvers: [finance]}
policies:
  - {decision: ask, connector: demo-ledger, action: refund, approvers: [bob]}
"""


def plan(new: str, old: str = BASE):  # type: ignore[no-untyped-def]
    running = parse_config(old, {})
    return running, plan_reload(running, sections_of(old, "app.yaml"), new, {}, "app.yaml")


@pytest.mark.parametrize(
    ("change", "applied", "needs_restart"),
    [
        (lambda t: t, (), ()),
        (lambda t: t.replace("bob: {email", "bob: {slack: U0BOB0001, email"), ("people",), ()),
        (lambda t: t.replace("admins: [alice]", "admins: [alice, bob]"), ("admins",), ()),
        (lambda t: t + "approvers: [finance]\n", ("approvers",), ()),
        (
            lambda t: t.replace("[alice, bob]}", "[alice]}").replace("workers: 4", "workers: 2"),
            ("groups",),
            ("server",),
        ),
        (lambda t: t + "approvals: {ttl: 1h}\n", (), ("approvals",)),
    ],
    ids=["same", "people", "admins", "approvers", "groups+server", "approvals"],
)
def test_what_a_reload_applies(change, applied, needs_restart) -> None:  # type: ignore[no-untyped-def]
    running, reload = plan(change(BASE))
    assert (reload.applied, reload.needs_restart) == (applied, needs_restart)
    if not applied:
        assert reload.config is running
    for field in dataclasses.fields(running):
        if field.name not in ("people", "groups", "admins", "approvers"):
            assert getattr(reload.config, field.name) is getattr(running, field.name), field


def test_the_running_sections_move_on_with_what_was_applied() -> None:
    new = BASE.replace("admins: [alice]", "admins: [alice, bob]").replace(
        "workers: 4", "workers: 2"
    )
    _, first = plan(new)
    again = plan_reload(first.config, first.sections, new, {}, "app.yaml")
    assert (again.applied, again.needs_restart) == ((), ("server",))
    assert again.config is first.config


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        (BASE.replace("admins: [alice]", "admins: [carl]"), "admins[0]: unknown person"),
        (BASE + "policies: []\n", "policies: duplicate key"),
        (BASE.replace("decision: ask", "decision: blok"), "policies[0].decision"),
        ("people: [\n", "invalid YAML"),
        # bob is named by the running rule and gate; the new file's own rule dropped him, but
        # rules need a restart: refused, with the path and why.
        (
            BASE.replace("  bob: {email: bob@example.com}\n", "")
            .replace("[alice, bob]", "[alice]")
            .replace("approvers: [bob]", "approvers: [alice]"),
            'policies[0].approvers[0]: unknown person or group "bob" (the running policies',
        ),
    ],
    ids=["unknown-admin", "duplicate-key", "malformed-rule", "yaml", "still-named"],
)
def test_a_reload_refused_names_the_yaml_path(new: str, expected: str) -> None:
    with pytest.raises(ConfigError) as refused:
        plan(new)
    assert any(expected in problem for problem in refused.value.problems), refused.value.problems
