"""The one channel registry: each channel registers once, and what it registers is found."""

from __future__ import annotations

import textwrap

from bot.channels import CHANNELS, channel
from cards.render import card_channels
from engine.config import parse_config
from engine.config.channels import CHANNEL_ADDRESSES


def test_each_channel_registers_once_and_the_web_installs_before_webhooks() -> None:
    names = [c.name for c in CHANNELS]
    assert len(set(names)) == len(names)
    assert names.index("web") < names.index("webhook")
    assert all(channel(name).name == name for name in names)


def test_every_card_format_belongs_to_a_registered_channel() -> None:
    names = {c.name for c in CHANNELS}
    assert set(card_channels()) <= names
    for each in CHANNELS:
        assert (each.cards is not None) == (each.name in card_channels())


def test_a_person_is_found_by_the_people_field_the_channel_reads() -> None:
    config = parse_config(
        textwrap.dedent(
            """
            people:
              alice: {slack: U012ABCDEF, teams: aad-alice}
              bob: {}
            """
        ),
        {},
        "test.yaml",
    )
    found = {(c.name, p): c.person_id(config, p) for c in CHANNELS for p in ("alice", "bob")}
    assert {key: value for key, value in found.items() if value} == {
        ("slack", "alice"): "U012ABCDEF",
        ("teams", "alice"): "aad-alice",
    }


def test_every_registered_channel_has_its_address_syntax_in_the_config() -> None:
    assert sorted(a.name for a in CHANNEL_ADDRESSES) == sorted(c.name for c in CHANNELS)
