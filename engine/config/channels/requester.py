"""Where the person who asked is told how their request ended (``engine.domain.notify``).

Once per channel kind the request's card goes to: in the first shared place of that kind
(``slack:C…``, ``teams:<conversation>``), when the channel can mention a person there
(``ChannelAddress.mentions``); otherwise in their own chat with the bot
(``<channel>:@<person>``), when the channel reaches people and has a way to find this one
(``person_problem``). Only a person of ``people:`` is told: an agent's token without a person,
or a name no longer configured, is told nothing. Decided when the request is made, like the
card's own addresses (``expand_channels``), and kept with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from engine.config.channels import (
    CHANNEL_ADDRESSES,
    PERSONAL,
    ChannelAddress,
    addressed_person,
    person_problem,
)
from engine.config.sections import Person


def _address(kind: str) -> ChannelAddress | None:
    return next((a for a in CHANNEL_ADDRESSES if a.name == kind and a.target is not None), None)


def requester_channels(
    channels: Iterable[str], requested_by: str | None, people: Mapping[str, Person]
) -> tuple[str, ...]:
    """The addresses where ``requested_by`` is told the outcome of a request whose card goes to
    ``channels`` (after ``expand_channels``), one per channel kind; () for nobody."""
    person = people.get(requested_by) if requested_by is not None else None
    if person is None:
        return ()
    places: dict[str, str] = {}  # kind -> where
    kinds: dict[str, ChannelAddress] = {}  # the channel kinds the card goes to, in order
    for channel in channels:
        kind, sep, _ = channel.partition(":")
        address = _address(kind)
        if not sep or address is None:
            continue  # the approval page: no messages
        kinds.setdefault(kind, address)
        if kind not in places and address.mentions and addressed_person(channel) is None:
            places[kind] = channel  # a shared place, where they can be mentioned
    for kind, address in kinds.items():
        own = f"{kind}:{PERSONAL}{person.name}"
        if kind in places or not address.people:
            continue
        if person_problem(own, {person.name: person}, {}) is None:
            places[kind] = own
    return tuple(places[k] for k in kinds if k in places)
