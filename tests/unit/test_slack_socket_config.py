"""``slack.socketMode``: an app-level token instead of a signing secret, checked at load."""

from __future__ import annotations

import textwrap

import pytest

from engine.config import AppConfig, parse_config
from engine.config.channels import channel_states
from engine.domain.errors import ConfigError


def parse(text: str, env: dict[str, str] | None = None) -> AppConfig:
    return parse_config(textwrap.dedent(text), env or {}, "test.yaml")


def slack_warnings(config: AppConfig) -> list[str]:
    return [w for w in config.warnings if w.startswith("slack")]


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(text, env)
    return caught.value.problems


def test_socket_mode_needs_no_signing_secret() -> None:
    config = parse(
        """
        slack: {botToken: "${SLACK_BOT_TOKEN}", socketMode: true, appToken: "${SLACK_APP_TOKEN}"}
        """,
        {"SLACK_BOT_TOKEN": "xoxb-1-2-abc", "SLACK_APP_TOKEN": "xapp-1-A0-1-abc"},
    )
    slack = config.slack
    assert slack.socket_mode and slack.app_token == "xapp-1-A0-1-abc"
    assert slack.signing_secret == "" and slack.enabled
    assert slack_warnings(config) == []
    assert ("slack", "set (Socket Mode)") in channel_states(config.channel_sections.get)


def test_socket_mode_without_an_app_token_is_an_error_at_its_path() -> None:
    found = problems(
        'slack: {botToken: xoxb-1, socketMode: true, appToken: "${SLACK_APP_TOKEN:-}"}'
    )
    assert len(found) == 1 and found[0].startswith("slack.appToken: is required with")


@pytest.mark.parametrize("token", ["xoxb-1-2-abc", "xoxp-1-2", "XAPP-1", "app-1"])
def test_an_app_token_that_is_not_xapp_is_an_error_at_its_path(token: str) -> None:
    found = problems(f"slack: {{botToken: xoxb-1, socketMode: true, appToken: '{token}'}}")
    assert found == [
        "slack.appToken: must be an app-level token (xapp-..., made under Basic Information -> "
        "App-Level Tokens with the connections:write scope), not a bot or user token"
    ]


def test_socket_mode_must_be_a_boolean() -> None:
    found = problems("slack: {botToken: xoxb-1, socketMode: yes please, appToken: xapp-1}")
    assert any(p.startswith("slack.socketMode:") for p in found), found


def test_over_http_the_app_token_is_unused_and_said_so() -> None:
    config = parse("slack: {botToken: xoxb-1, signingSecret: 0123456789abcdef, appToken: xapp-1}")
    assert config.slack.enabled and not config.slack.socket_mode
    assert slack_warnings(config) == [
        "slack.appToken: used only with slack.socketMode: true; it is ignored"
    ]


def test_socket_mode_without_a_bot_token_is_disabled_with_a_warning() -> None:
    config = parse("slack: {socketMode: true, appToken: xapp-1}")
    assert not config.slack.enabled
    assert slack_warnings(config) == [
        "slack.botToken: needed in Socket Mode too (it posts the cards); Slack is disabled"
    ]
