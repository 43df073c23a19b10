"""Ids for runs, steps and requests outside tests: time-ordered random UUIDs."""

from __future__ import annotations

import os
import threading
import time
import weakref


class UuidSource:
    """Time-ordered random UUIDs (version 7, RFC 9562): 48 bits of Unix milliseconds, then 74
    random bits. Ids made close in time sort close together, so the primary-key and foreign-key
    indexes on runs, the journal and requests grow at their right edge: a commit dirties a few
    pages, not one random page per index, and a run's rows stay near each other as the
    database grows. An id tells when it was made, to the millisecond; its random bits keep
    it unguessable. Spelled as ``str(uuid.UUID(...))`` spells it."""

    _BATCH = 64  # ids' worth of random bytes read at once

    def __init__(self) -> None:
        # Random bytes are read from the system for 64 ids at a time: a read is a system call,
        # and an engine thread that makes one gives up the GIL and waits to get it back from
        # the SQLite writer thread (measured: 4 % of the event loop's time while parking).
        self._random = b""
        self._lock = threading.Lock()
        _SOURCES.add(self)

    def new_id(self) -> str:
        with self._lock:
            if not self._random:
                self._random = os.urandom(10 * self._BATCH)
            bits, self._random = self._random[:10], self._random[10:]
        h = f"{time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF:012x}{bits.hex()}"
        variant = "89ab"[int(h[16], 16) & 3]  # RFC 9562: the top two bits are 10
        return f"{h[:8]}-{h[8:12]}-7{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


_SOURCES: weakref.WeakSet[UuidSource] = weakref.WeakSet()


def _forget_random_bytes() -> None:
    """In a forked child: bytes read before the fork would give the parent's ids again."""
    for source in list(_SOURCES):
        source._random = b""


os.register_at_fork(after_in_child=_forget_random_bytes)
