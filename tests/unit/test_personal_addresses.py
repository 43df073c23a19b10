"""``teams:@<person or group>`` sends a card to each one's personal chat with the bot: the name
must be a person or group of ``people:``/``groups:``, and someone in it must have a Teams id;
otherwise the configuration fails at load, naming the YAML path."""

from __future__ import annotations

import pytest

from engine.config import parse_config
from engine.config.channels import personal_target
from engine.domain.errors import ConfigError

PEOPLE = """
people:
  alice: {email: alice@example.com, teams: aad-alice}
  bob: {email: bob@example.com, teams: aad-bob}
  carol: {email: carol@example.com}
groups:
  finance: [alice, bob, carol]
  audit: [carol]
"""


def workflow(channel: str) -> str:
    return (
        PEOPLE
        + "workflows:\n  pay:\n    nodes:\n"
        + f"      - {{id: ask, type: approval, approvers: [finance], channels: ['{channel}']}}\n"
    )


@pytest.mark.parametrize("channel", ["teams:@alice", "teams:@finance", "teams:ops"])
def test_people_groups_and_named_conversations_load(channel: str):
    config = parse_config(workflow(channel), {})
    assert config.workflows["pay"].nodes[0].channels == (channel,)


@pytest.mark.parametrize(
    ("channel", "problem"),
    [
        ("teams:@alcie", '"alcie" is no person or group (did you mean alice?)'),
        ("teams:@carol", "nobody in carol has a teams: id in people:"),
        ("teams:@audit", "nobody in audit has a teams: id in people:"),
        ("teams:@", '"" is no person or group'),
    ],
)
def test_an_address_reaching_nobody_is_a_config_error_at_its_path(channel: str, problem: str):
    with pytest.raises(ConfigError) as caught:
        parse_config(workflow(channel), {})
    (line,) = caught.value.problems
    assert line.startswith(f'workflows.pay.nodes[0].channels[0]: "{channel}": ')
    assert problem in line


def test_gate_channels_and_stored_workflows_are_checked_too():
    with pytest.raises(ConfigError) as caught:
        parse_config(PEOPLE + "gate: {channels: ['teams:@nobody']}\n", {})
    assert caught.value.problems[0].startswith('gate.channels[0]: "teams:@nobody"')
    config = parse_config(PEOPLE, {})
    nodes = [{"id": "ask", "type": "approval", "channels": ["teams:@ghost"]}]
    with pytest.raises(ConfigError) as stored:
        config.validate_workflow("stored", {"name": "stored", "nodes": nodes})
    assert "nodes[0].channels[0]" in stored.value.problems[0]
    assert '"ghost" is no person or group' in stored.value.problems[0]


def test_personal_target_reads_the_prefix():
    assert personal_target("teams:@finance") == ("teams", "finance")
    assert personal_target("teams:ops") is None
    assert personal_target("slack:C0123ABCD") is None
    assert personal_target("web") is None
