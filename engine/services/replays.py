"""Signed requests act once: a replay of a request already accepted is acknowledged, not acted on.

A chat platform signs each request it sends (Slack: an HMAC over the timestamp and the body),
and the signature stays valid for a window (Slack's: 5 minutes). Inside that window anyone who
saw the bytes can send them again, and a retry by the platform itself carries the same id. A
front end names each accepted request by a key (its signature, or the platform's own id) and
asks ``ReplayGuard.first`` before acting: the key is inserted if absent, in the database, so the
answer holds across replicas and restarts. Keys are kept for as long as the front end says
(past the window) and expired keys are swept here, at most once a ``sweep_every``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from engine.domain.errors import SignoffError
from engine.ports import Clock
from engine.ports.replays import ReplayStore

log = logging.getLogger(__name__)

SWEEP_EVERY = timedelta(minutes=1)


class ReplayGuard:
    """Whether a signed request is seen for the first time (``first``), on a ``ReplayStore``."""

    def __init__(
        self, store: ReplayStore, clock: Clock, *, sweep_every: timedelta = SWEEP_EVERY
    ) -> None:
        self._store = store
        self._clock = clock
        self.sweep_every = sweep_every
        self._swept: datetime | None = None

    async def first(self, key: str, keep: timedelta) -> bool:
        """Record ``key`` for ``keep``; True the first time, False for a replay within it.
        Raises ``StoreError`` when the database cannot say: the caller must not act then."""
        now = self._clock.now()
        fresh = await self._store.remember_request(key, now, now + keep)
        await self._sweep(now)
        return fresh

    async def _sweep(self, now: datetime) -> None:
        if self._swept is not None and now - self._swept < self.sweep_every:
            return
        self._swept = now
        try:
            swept = await self._store.forget_requests(now)
        except SignoffError as exc:  # housekeeping: the next sweep deletes them
            log.warning("expired request keys not swept: %s", exc)
            return
        if swept:
            log.debug("swept %d expired request keys", swept)
