"""The channels, in the order they install: the one registry (``bot.plugin`` says what each
registers). Adding a channel adds its package and a line here; nothing else names it.

The web installs before the webhook channel, whose messages carry the approval page's signed
links.
"""

from __future__ import annotations

from aiohttp import web

from bot import slack, teams, webhook
from bot import web as web_channel
from bot.plugin import Channel
from engine.assembly import Engine

CHANNELS: tuple[Channel, ...] = (
    slack.CHANNEL,
    teams.CHANNEL,
    web_channel.CHANNEL,
    webhook.CHANNEL,
)


def channel(name: str) -> Channel:
    """The channel registered as ``name``; ``KeyError`` for none."""
    for found in CHANNELS:
        if found.name == name:
            return found
    raise KeyError(name)


def install_channels(app: web.Application, engine: Engine) -> None:
    """Each channel's routes, startup and outbox sink, in registry order."""
    for each in CHANNELS:
        each.install(app, engine)
