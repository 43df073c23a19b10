"""The ids the engine draws: random version 4 UUIDs in their usual spelling."""

from __future__ import annotations

import uuid

from engine.ports import UuidSource


def test_ids_are_random_version_4_uuids_spelled_as_uuid_spells_them():
    ids = [UuidSource().new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == text  # lower-case hex, dashes where uuid puts them
    # every variant digit (8, 9, a, b) occurs: the two variant bits are fixed, not the rest
    assert {text[19] for text in ids} == set("89ab")
