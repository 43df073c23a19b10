"""``wait_or_timeout``: an event or a time on the injected clock, whichever first; no sleeper
is left behind on a manual clock either way."""

from __future__ import annotations

import asyncio

from engine.services.timers import wait_or_timeout
from tests.support.clock import ManualClock
from tests.support.waiting import settled, until


async def test_an_event_set_already_returns_at_once() -> None:
    clock, event = ManualClock(), asyncio.Event()
    event.set()
    assert await wait_or_timeout(clock, event, 60) is True
    assert clock.sleepers == []


async def test_the_event_cuts_the_wait_short() -> None:
    clock, event = ManualClock(), asyncio.Event()
    waiting = asyncio.create_task(wait_or_timeout(clock, event, 60))
    await until(lambda: clock.sleepers == [60.0])
    event.set()
    assert await waiting is True
    assert clock.sleepers == []


async def test_the_clock_ends_the_wait() -> None:
    clock, event = ManualClock(), asyncio.Event()
    waiting = asyncio.create_task(wait_or_timeout(clock, event, 60))
    await until(lambda: clock.sleepers == [60.0])
    clock.advance(seconds=59)
    await settled()
    assert not waiting.done()
    clock.advance(seconds=1)
    assert await waiting is False
    assert clock.sleepers == []


async def test_a_cancelled_wait_leaves_no_sleeper() -> None:
    clock, event = ManualClock(), asyncio.Event()
    waiting = asyncio.create_task(wait_or_timeout(clock, event, 60))
    await until(lambda: clock.sleepers == [60.0])
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert waiting.cancelled()
    assert clock.sleepers == []
