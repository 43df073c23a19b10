"""Waiting on the injected clock: "this event or that much time, whichever first".

``Clock.sleep`` waits on the clock's time (the wall clock in production, a manual one in tests);
a timer that can also be cut short by something happening (a wake-up, a shutdown) races that
sleep against the event here, so a test moves the clock instead of waiting for the timer.
"""

from __future__ import annotations

import asyncio

from engine.ports import Clock


async def wait_or_timeout(clock: Clock, event: asyncio.Event, seconds: float) -> bool:
    """Wait until ``event`` is set or ``seconds`` have passed on ``clock``, whichever comes
    first; returns whether the event is set. Both waits have ended when it returns (a manual
    clock lists no sleeper left behind)."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((waiter, sleeper), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiter, sleeper):
            task.cancel()
        await asyncio.wait((waiter, sleeper))
    return event.is_set()
