"""The channels, in the order they install: the one registry (``bot.plugin`` says what each
registers). Adding a channel adds its package and a line here; nothing else names it.

The console (``bot.console``, not a channel) installs before all of them, from the app factory:
it holds the page context the approval page reads and the signed links the webhook channel's
messages carry (``app[LINKS]``).

The channel packages import a lot (the chat SDKs, the web server): they are imported on first
use of ``CHANNELS`` (or ``channels()``), so that ``bot.cli`` reads ``COMMANDS`` cheaply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

    from bot.plugin import Channel
    from engine.assembly import Engine

# The ``signoff`` commands a channel adds: name -> (help, module, function registering its
# parser on the subparsers). ``signoff --help`` lists them from here; ``bot.cli`` imports the
# module only when its command is the one given.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "teams": ("Microsoft Teams", "bot.teams.cli", "add_parser"),
}


def channels() -> tuple[Channel, ...]:
    """The registered channels, in install order."""
    from bot import email, slack, webhook
    from bot import web as web_channel
    from bot.teams import channel as teams

    return (slack.CHANNEL, teams.CHANNEL, web_channel.CHANNEL, webhook.CHANNEL, email.CHANNEL)


def __getattr__(name: str) -> tuple[Channel, ...]:
    """``CHANNELS``: ``channels()``, imported on first use (module docstring)."""
    if name == "CHANNELS":
        return channels()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def channel(name: str) -> Channel:
    """The channel registered as ``name``; ``KeyError`` for none."""
    for found in channels():
        if found.name == name:
            return found
    raise KeyError(name)


def install_channels(app: web.Application, engine: Engine) -> None:
    """Each channel's routes, startup and outbox sink, in registry order."""
    for each in channels():
        each.install(app, engine)
