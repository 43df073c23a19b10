"""The ids the engine draws: time-ordered random UUIDs (version 7) in their usual spelling."""

from __future__ import annotations

import os
import threading
import time
import uuid

from engine.adapters.ids import UuidSource


def test_ids_are_version_7_uuids_spelled_as_uuid_spells_them():
    before = time.time_ns() // 1_000_000
    ids = [UuidSource().new_id() for _ in range(20_000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
        assert str(parsed) == text  # lower-case hex, dashes where uuid puts them
        assert before <= parsed.int >> 80 <= after  # the first 48 bits: Unix milliseconds
    # the bits after the time are random: every variant digit (8, 9, a, b) occurs, and ids
    # made in one millisecond differ in their last 8 characters (a replica's owner name; 32
    # random bits, so among 20,000 a few may meet by chance)
    assert {text[19] for text in ids} == set("89ab")
    assert len({text[-8:] for text in ids}) > len(ids) - 10


def test_ids_made_later_sort_after_earlier_ones(monkeypatch):
    source = UuidSource()
    made = []
    for ms in (1_700_000_000_000, 1_700_000_000_001, 1_700_000_060_000, 2_000_000_000_000):
        monkeypatch.setattr(time, "time_ns", lambda ms=ms: ms * 1_000_000 + 999_999)
        made.append(source.new_id())
    assert sorted(made) == made
    assert [uuid.UUID(text).int >> 80 for text in made] == [
        1_700_000_000_000,
        1_700_000_000_001,
        1_700_000_060_000,
        2_000_000_000_000,
    ]


def test_one_source_never_repeats_its_random_bits_across_threads_or_a_fork():
    """The random bytes are read ahead for many ids: threads drawing at once each get their
    own, and a forked child reads new ones instead of the parent's next."""
    source = UuidSource()
    source.new_id()  # bytes for the next ids are read now
    drawn: list[str] = []
    threads = [
        threading.Thread(target=lambda: drawn.extend(source.new_id() for _ in range(2_000)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({text[-12:] for text in drawn}) == len(drawn) == 8_000
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, to the parent
        os.write(writer, source.new_id().encode())
        os._exit(0)
    os.close(writer)
    os.waitpid(pid, 0)
    child = os.read(reader, 64).decode()
    os.close(reader)
    assert child[-12:] != source.new_id()[-12:]
