"""The app manifest matches what the code serves: one events URL for everything, the slash
command, and the scopes the Web API calls need."""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.slack import EVENTS_PATH
from bot.slack.commands import COMMAND
from bot.slack.oauth import REDIRECT_PATH, manifest_scopes

MANIFEST = Path(__file__).resolve().parents[3] / "bot" / "manifests" / "slack.yaml"


def test_the_manifest_points_everything_at_the_events_endpoint() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())
    settings, features = manifest["settings"], manifest["features"]
    (command,) = features["slash_commands"]
    assert command["command"] == COMMAND
    urls = [
        command["url"],
        settings["interactivity"]["request_url"],
        settings["event_subscriptions"]["request_url"],
    ]
    assert all(url.endswith(EVENTS_PATH) for url in urls)
    assert settings["interactivity"]["is_enabled"] is True
    assert settings["socket_mode_enabled"] is False
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    # chat.postMessage/update, /signoff, app_mention, conversations.open (direct messages)
    assert {"chat:write", "commands", "app_mentions:read", "im:write"} <= scopes
    # Signoff never reads conversations (Slack allows apps outside its Marketplace one
    # history request a minute): no history scope is asked for.
    assert not {s for s in scopes if s.endswith(":history")}
    events = set(settings["event_subscriptions"]["bot_events"])
    assert {
        "app_mention",
        "app_home_opened",
        "user_change",
        "app_uninstalled",
        "tokens_revoked",
    } <= events


def test_the_manifest_has_the_home_tab_and_the_lookup_scopes() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    # users.info / users.lookupByEmail, with the email (bot/slack/people.py)
    assert {"users:read", "users:read.email"} <= set(manifest["oauth_config"]["scopes"]["bot"])


def test_the_manifest_has_the_oauth_redirect_and_the_scopes_an_install_asks_for() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())
    (redirect,) = manifest["oauth_config"]["redirect_urls"]
    assert redirect == "https://signoff.example.com" + REDIRECT_PATH
    assert list(manifest_scopes()) == manifest["oauth_config"]["scopes"]["bot"]
