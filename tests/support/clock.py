"""A clock tests move by hand: no test waits for real time to pass when it can advance this."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta


class ManualClock:
    """A clock that moves only when told to: tests advance time instead of sleeping. ``sleep``
    returns once ``advance`` or ``set`` has moved the clock to its deadline or past it."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._now

    def advance(self, **delta: float) -> datetime:
        self._now += timedelta(**delta)
        self._wake_due()
        return self._now

    def set(self, when: datetime) -> None:
        self._now = when
        self._wake_due()

    async def sleep(self, seconds: float) -> None:
        deadline = self._now + timedelta(seconds=seconds)
        if seconds <= 0:
            await asyncio.sleep(0)  # a zero sleep still yields, as asyncio's does
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((deadline, waiter))
        try:
            await waiter
        finally:
            self._sleepers = [(d, w) for d, w in self._sleepers if w is not waiter]

    @property
    def sleepers(self) -> list[float]:
        """The seconds each pending ``sleep`` has still to wait, soonest first (tests wait
        for a sleeper to appear, then advance the clock by what it asked)."""
        return sorted((d - self._now).total_seconds() for d, _ in self._sleepers)

    def _wake_due(self) -> None:
        for deadline, waiter in self._sleepers:
            if deadline <= self._now and not waiter.done():
                waiter.set_result(None)
