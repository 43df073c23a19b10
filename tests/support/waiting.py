"""Waiting in tests, in one place: every poll of "has it happened yet?" goes through here.

``until`` polls a condition (sync or async) with a short real sleep: the work it waits for is
real (a worker's task, an HTTP round trip, a database write), not a timer; timers are driven by
moving a ``ManualClock``. ``settled`` lets the callbacks already queued on the loop run.
``until_sync`` is ``until`` for tests outside an event loop (a subprocess, a thread).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

POLL_SECONDS = 0.01


async def until(condition: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    """Return ``condition()``'s first truthy value (awaited when it is a coroutine); fail
    after ``timeout`` seconds of real time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition not met in {timeout} s{': ' + what if what else ''}")
        # Real work (tasks, sockets, a database) is in flight: give it time, not a clock.
        await asyncio.sleep(POLL_SECONDS)


def until_sync(
    condition: Callable[[], Any], timeout: float = 10.0, every: float = 0.1, what: str = ""
) -> Any:
    """``until`` for code outside an event loop (waiting on a subprocess or a thread)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout} s{': ' + what if what else ''}")
        time.sleep(every)  # another process or thread does the work: real time passes


async def settled(turns: int = 20) -> None:
    """Let the callbacks and tasks already runnable on the loop run (no time passes)."""
    for _ in range(turns):
        await asyncio.sleep(0)
