"""The address syntax of every channel in ``channels:``: the one table the config reads.

A channel (``bot/<channel>/`` registers it, ``bot.channels`` lists it) owns an address prefix:
``<name>:<target>``, or its bare name when it has no targets (the approval page). The engine
never imports ``bot``, so the syntax of each lives here, as data: card destinations are
checked against it (``check_channel``), the stored-workflow JSON schema is built from it
(``channel_pattern``), and a channel that needs credentials says which (``channel_warnings``).
This module and ``bot.channels`` are the only ones outside a channel's packages that name it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from engine.config.sections import SlackConfig, TeamsConfig
from engine.config.values import NAME

__all__ = [
    "CHANNEL_ADDRESSES",
    "ChannelAddress",
    "channel_pattern",
    "channel_states",
    "channel_warnings",
    "check_channel",
]


def _slack_state(config: SlackConfig) -> str:
    token, secret = config.bot_token, config.signing_secret
    if not token and not secret:
        return "unset"
    problems = []
    if not token.startswith("xoxb-"):
        problems.append("botToken does not look like a bot token (xoxb-...)")
    if len(secret) < 16:
        problems.append("signingSecret is too short")
    return "invalid: " + "; ".join(problems) if problems else "set"


def _teams_state(config: TeamsConfig) -> str:
    if not config.app_id:
        if config.insecure_local_dev:
            return "unset, insecureLocalDev ON: unsigned requests accepted (local testing only)"
        return "unset (/api/messages not mounted)"
    if not config.app_password:
        return "invalid: appId set without appPassword"
    return "set"


@dataclass(frozen=True)
class ChannelAddress:
    """How ``channels:`` addresses one channel."""

    name: str  # the prefix before ":" (or the whole address when ``target`` is None)
    target: str | None  # a pattern (Python ``re`` and JavaScript alike) of what follows ":"
    shape: str  # as messages spell it: "slack:<channel id>"
    bad_target: str | None = None  # the problem for a bad target ({target}: it, as JSON)
    # A channel that needs credentials: (its title, the keys that enable it). Addresses of it
    # parse without them but deliver nothing, which is a warning.
    needs: tuple[str, str] | None = None
    # Whether its credentials are set, from its own section of app.yaml (``signoff check``).
    state: Callable[[Any], str] | None = None

    def matches_target(self, target: str) -> bool:
        return self.target is not None and re.fullmatch(self.target, target) is not None


CHANNEL_ADDRESSES: tuple[ChannelAddress, ...] = (
    ChannelAddress("web", None, "web"),
    ChannelAddress(
        "slack",
        r"[CGD][A-Z0-9]{2,}",
        "slack:<channel id>",
        bad_target="slack channel must be a channel id like C0123ABCD, got {target}",
        needs=("Slack", "slack.botToken and slack.signingSecret"),
        state=_slack_state,
    ),
    ChannelAddress("teams", r"[\s\S]*\S[\s\S]*", "teams:<conversation name>", state=_teams_state),
    ChannelAddress("webhook", NAME, "webhook:<name>"),
)


def _shapes() -> str:
    shapes = [a.shape for a in CHANNEL_ADDRESSES]
    return ", ".join(shapes[:-1]) + " or " + shapes[-1]


def check_channel(channel: str) -> str | None:
    """Why ``channel`` is not a valid card destination, or None when it is."""
    kind, sep, target = channel.partition(":")
    for address in CHANNEL_ADDRESSES:
        if address.target is None:
            if channel == address.name:
                return None
        elif sep and kind == address.name:
            if address.matches_target(target):
                return None
            if address.bad_target is not None:
                return address.bad_target.format(target=json.dumps(target))
    return f"must be {_shapes()}, got {json.dumps(channel)}"


def channel_pattern() -> str:
    """Every valid address as one pattern (unanchored), for the stored-workflow schema."""
    return "|".join(
        a.name if a.target is None else f"{a.name}:{a.target}" for a in CHANNEL_ADDRESSES
    )


def channel_warnings(
    channels: Iterable[str], at: Callable[[int], str], enabled: Callable[[str], bool]
) -> list[str]:
    """Addresses that parse but deliver nothing: their channel lacks its credentials.
    ``at(i)``: the YAML path of the i-th; ``enabled(name)``: whether that channel is set up."""
    out: list[str] = []
    for i, channel in enumerate(channels):
        for address in CHANNEL_ADDRESSES:
            if address.needs is None or enabled(address.name):
                continue
            if channel.startswith(f"{address.name}:"):
                title, keys = address.needs
                out.append(
                    f"{at(i)}: {title} is not configured ({keys}), so {channel} gets no card"
                )
    return out


def channel_states(section: Callable[[str], object]) -> list[tuple[str, str]]:
    """Each channel that needs credentials, and whether they are set; ``section(name)``: that
    channel's section of the configuration (``AppConfig.slack``, ...)."""
    return [(a.name, a.state(section(a.name))) for a in CHANNEL_ADDRESSES if a.state is not None]
