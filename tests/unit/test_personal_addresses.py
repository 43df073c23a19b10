"""Addresses to people (``<channel>:@<person or group>``, ``<channel>:dm``) are one mechanism
for every channel that reaches people in their own chat with the bot (Slack, Teams): the name
must be a person or group of ``people:``/``groups:``, and someone in it must be findable on that
channel (a Teams id; a Slack id or an email, which Slack can look up), or the configuration
fails at load, naming the YAML path; a request expands each address into one
``<channel>:@<person>`` per person."""

from __future__ import annotations

import pytest

from engine.config import parse_config
from engine.config.channels import addressed_person, check_channel
from engine.domain.errors import ConfigError

PEOPLE = """
people:
  alice: {email: alice@example.com, teams: aad-alice, slack: U0ALICE01}
  bob: {email: bob@example.com, teams: aad-bob}
  carol: {email: carol@example.com}
  zoe: {}
groups:
  finance: [alice, bob, carol]
  audit: [carol]
  nobody: [zoe]
"""


def workflow(channel: str) -> str:
    return (
        PEOPLE
        + "workflows:\n  pay:\n    nodes:\n"
        + f"      - {{id: ask, type: approval, approvers: [finance], channels: ['{channel}']}}\n"
    )


@pytest.mark.parametrize(
    "channel",
    [
        "teams:@alice",
        "teams:@finance",
        "teams:dm",
        "teams:ops",
        "slack:@finance",
        "slack:@audit",  # carol has no Slack id, but her email can be looked up
        "slack:dm",
    ],
)
def test_people_groups_and_named_conversations_load(channel: str):
    config = parse_config(workflow(channel), {})
    assert config.workflows["pay"].nodes[0].channels == (channel,)


@pytest.mark.parametrize(
    ("channel", "problem"),
    [
        ("teams:@alcie", 'unknown person or group "alcie" (people: and groups:) (did you mean'),
        ("slack:@alcie", 'unknown person or group "alcie" (people: and groups:) (did you mean'),
        ("teams:@carol", "nobody in carol has a teams: id in people:, so teams:@carol would"),
        ("teams:@audit", "nobody in audit has a teams: id in people:"),
        ("slack:@nobody", "nobody in nobody has a slack: id or an email: in people:"),
        ("teams:@", 'teams:@ must be followed by a person or group, got "teams:@"'),
        ("slack:@a b", 'slack:@ must be followed by a person or group, got "slack:@a b"'),
    ],
)
def test_an_address_reaching_nobody_is_a_config_error_at_its_path(channel: str, problem: str):
    with pytest.raises(ConfigError) as caught:
        parse_config(workflow(channel), {})
    (line,) = caught.value.problems
    assert line.startswith("workflows.pay.nodes[0].channels[0]: ")
    assert problem in line


def test_gate_channels_and_stored_workflows_are_checked_too():
    with pytest.raises(ConfigError) as caught:
        parse_config(PEOPLE + "gate: {channels: ['teams:@ghost']}\n", {})
    assert caught.value.problems[0].startswith('gate.channels[0]: unknown person or group "ghost"')
    config = parse_config(PEOPLE, {})
    nodes = [{"id": "ask", "type": "approval", "channels": ["teams:@ghost"]}]
    with pytest.raises(ConfigError) as stored:
        config.validate_workflow("stored", {"name": "stored", "nodes": nodes})
    assert "nodes[0].channels[0]" in stored.value.problems[0]
    assert 'unknown person or group "ghost"' in stored.value.problems[0]


def test_every_channel_reaching_people_expands_one_address_per_person():
    config = parse_config(workflow("teams:@finance"), {})
    channels = ["teams:@finance", "teams:dm", "slack:@audit", "slack:dm", "teams:ops", "web"]
    assert config.expand_channels(channels, ["dave", "alice"]) == (
        "teams:@alice",
        "teams:@bob",
        "teams:@carol",
        "teams:@dave",
        "slack:@carol",
        "slack:@dave",
        "slack:@alice",
        "teams:ops",
        "web",
    )


def test_the_person_of_an_address_is_read_back_only_where_a_channel_reaches_people():
    assert addressed_person("teams:@finance") == "finance"
    assert addressed_person("slack:@bob") == "bob"
    assert addressed_person("teams:dm") is None  # expanded before anything reads it
    assert addressed_person("teams:ops") is None
    assert addressed_person("webhook:@bob") is None
    assert addressed_person("web") is None
    assert check_channel("webhook:@bob") is not None
