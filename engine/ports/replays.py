"""The store's record of signed requests already acted on (``engine.services.replays``)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class ReplayStore(Protocol):
    async def remember_request(self, key: str, now: datetime, until: datetime) -> bool:
        """Insert ``key`` if absent (or expired); True when this call inserted it."""

    async def forget_requests(self, now: datetime, *, limit: int = 5000) -> int:
        """Delete keys expired at ``now`` (at most ``limit``); returns how many."""
