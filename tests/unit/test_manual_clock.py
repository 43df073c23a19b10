"""``ManualClock.sleep``: a sleeper wakes when the test moves the clock to its deadline, never
by itself."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from engine.adapters.clock import SystemClock
from tests.support.clock import ManualClock


async def turns(n: int = 10) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_sleep_returns_once_advanced_to_the_deadline() -> None:
    clock = ManualClock()
    sleeper = asyncio.create_task(clock.sleep(5))
    await turns()
    assert clock.sleepers == [5.0] and not sleeper.done()
    clock.advance(seconds=4)
    await turns()
    assert clock.sleepers == [1.0] and not sleeper.done()
    clock.advance(seconds=1)
    await sleeper
    assert clock.sleepers == []


async def test_set_wakes_the_sleepers_it_passes() -> None:
    clock = ManualClock()
    start = clock.now()
    short, long = asyncio.create_task(clock.sleep(1)), asyncio.create_task(clock.sleep(60))
    await turns()
    clock.set(start + timedelta(seconds=2))
    await short
    await turns()
    assert not long.done() and clock.sleepers == [58.0]
    long.cancel()
    await turns()
    assert clock.sleepers == []  # a cancelled sleeper is forgotten


async def test_the_system_clock_sleeps_on_asyncio() -> None:
    await asyncio.wait_for(SystemClock().sleep(0), 1)
