"""The wall clock: the ``Clock`` the engine runs on outside tests."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta


class SystemClock:
    """The wall clock, optionally corrected by an offset (e.g. to follow the database clock)."""

    def __init__(self, offset: timedelta = timedelta(0)) -> None:
        self.offset = offset

    def now(self) -> datetime:
        now = datetime.now(UTC)
        return now + self.offset if self.offset else now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
