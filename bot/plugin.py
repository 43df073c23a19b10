"""What a channel registers: the one record (``Channel``) each channel package declares.

DESIGN's second seam: a channel (Slack, Teams, web, webhook, email) is one package
``bot/<channel>/`` (with ``cards/<channel>/`` when it shows cards) that declares, in one
``CHANNEL`` record, everything the rest of the code needs from it; ``bot.channels`` lists the
records and nothing else names a channel. What the record holds:

* ``name``: the address prefix it owns in ``channels:`` (``<name>:<target>``, or the bare name
  for a channel with no targets); the syntax itself is validated engine-side, in
  ``engine.config.channels``, because the engine never imports ``bot``;
* ``person_field``: the ``people:`` field that holds a person's identity on it, if any;
* ``install(app, engine)``: its aiohttp routes, startup and cleanup, and its outbox sink,
  registered with ``engine.add_sink(name, ...)`` (the engine receives sinks by channel name);
* its card and notice renderer: ``cards.render.renderer(name)``, found by the same name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from cards.render import CardRenderer, card_channels, renderer
from engine.assembly import Engine
from engine.config import AppConfig

Install = Callable[[web.Application, Engine], None]


@dataclass(frozen=True)
class Channel:
    """One channel's registration (module docstring)."""

    name: str
    install: Install
    person_field: str | None = None

    def person_id(self, config: AppConfig, person: str) -> str | None:
        """``person``'s identity on this channel (their ``people:`` field), if they have one."""
        found = config.people.get(person)
        if found is None or self.person_field is None:
            return None
        return found.reached_by(self.person_field)

    @property
    def cards(self) -> CardRenderer | None:
        """Its card and notice renderer; None for a channel that shows no cards."""
        return renderer(self.name) if self.name in card_channels() else None
