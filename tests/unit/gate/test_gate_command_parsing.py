"""The chat grammar, parsed (execution against a database is in the integration tests)."""

from __future__ import annotations

import pytest

from engine.domain.errors import CommandUsageError
from engine.gate.commands import GateCommand, parse
from engine.gate.settings import Scope


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("help", GateCommand("help")),
        ("gate", GateCommand("help")),
        ("  GATE   help ", GateCommand("help")),
        ("gate status", GateCommand("status")),
        ("gate status agent=billing-bot", GateCommand("status", {}, Scope.AGENT, "billing-bot")),
        ("gate on", GateCommand("set", {"enabled": True})),
        ("Gate OFF", GateCommand("set", {"enabled": False})),
        ("gate threshold 0.8", GateCommand("set", {"threshold": 0.8})),
        ("gate threshold 1", GateCommand("set", {"threshold": 1.0})),
        ("gate threshold 0", GateCommand("set", {"threshold": 0.0})),
        (
            "gate threshold 0.9 agent=Billing-Bot",
            GateCommand("set", {"threshold": 0.9}, Scope.AGENT, "Billing-Bot"),
        ),
        (
            "gate threshold 0.5 node=connector",
            GateCommand("set", {"threshold": 0.5}, Scope.NODE_TYPE, "connector"),
        ),
        ("gate estimator verbalization", GateCommand("set", {"estimator": "verbalization"})),
        ("gate estimator Self-Consistency", GateCommand("set", {"estimator": "self-consistency"})),
        ("gate samples 7", GateCommand("set", {"samples": 7})),
        ("gate samples 12", GateCommand("set", {"samples": 12})),  # becomes 5, with a warning
        ("gate calibrate on", GateCommand("set", {"calibrate": True})),
        ("gate off node=tool", GateCommand("set", {"enabled": False}, Scope.NODE_TYPE, "tool")),
    ],
)
def test_parse(text, command):
    assert parse(text) == command


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("status", "unknown command 'status'"),
        ("gate dance", "unknown gate command 'dance'"),
        ("gate threshold", "Usage: gate threshold <0..1>"),
        ("gate threshold high", "must be a number from 0 to 1, got 'high'"),
        ("gate threshold 1.5", "must be a number from 0 to 1, got '1.5'"),
        ("gate threshold -0.1", "must be a number from 0 to 1"),
        ("gate threshold nan", "must be a number from 0 to 1"),
        ("gate threshold 0.5 agent=a node=tool", "agent= or node=, not both"),
        ("gate threshold 0.5 node=approval", "node must be one of tool, connector, ai-step"),
        ("gate threshold 0.5 team=x", "unexpected 'team=x'"),
        ("gate threshold 0.5 agent=", "unexpected 'agent='"),
        ("gate estimator magic", "unknown estimator 'magic'"),
        ("gate samples five", "whole number"),
        ("gate calibrate maybe", "Usage: gate calibrate on|off"),
        ("gate on please", "Usage: gate on | gate off"),
    ],
)
def test_bad_commands_give_a_usage_line(text, says):
    with pytest.raises(CommandUsageError) as caught:
        parse(text)
    assert says in caught.value.message
    assert "Usage:" in caught.value.message
