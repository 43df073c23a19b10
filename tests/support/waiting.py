"""Waiting in tests, in one place: every poll of "has it happened yet?" goes through here.

``until`` polls a condition (sync or async) with a short real sleep: the work it waits for is
real (a worker's task, an HTTP round trip, a database write), not a timer; timers are driven by
moving a ``ManualClock``. ``within`` is ``until`` that answers instead of failing; ``quiet``
lets real time pass before a test asserts that nothing more happened. ``settled`` lets the
callbacks already queued on the loop run. ``within_sync``, ``until_sync`` and ``quiet_sync``
are the same for tests outside an event loop (a subprocess, a thread).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

POLL_SECONDS = 0.01


async def within(condition: Callable[[], Any], seconds: float, every: float = POLL_SECONDS) -> Any:
    """``condition()``'s first truthy value (awaited when it is a coroutine) within ``seconds``
    of real time, asked every ``every`` seconds; else its last (falsy) value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value or loop.time() > deadline:
            return value
        # Real work (tasks, sockets, a database, another process) is in flight: give it real
        # time. The one real sleep of the async helpers; timers are moved on a ManualClock.
        await asyncio.sleep(max(min(every, deadline - loop.time()), 0))


async def until(condition: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    """``condition()``'s first truthy value; fail after ``timeout`` seconds of real time."""
    value = await within(condition, timeout)
    if not value:
        raise AssertionError(f"condition not met in {timeout} s{': ' + what if what else ''}")
    return value


async def quiet(seconds: float) -> None:
    """Let ``seconds`` of real time pass: before asserting that nothing more happened (a reply
    not sent, a process not stopped), where real servers or processes would have done it."""
    await within(lambda: False, seconds, every=seconds)


def within_sync(condition: Callable[[], Any], seconds: float, every: float = 0.1) -> Any:
    """``within`` for code outside an event loop (waiting on a subprocess or a thread),
    polling every ``every`` seconds."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)  # another process or thread does the work: real time passes


def until_sync(
    condition: Callable[[], Any], timeout: float = 10.0, every: float = 0.1, what: str = ""
) -> Any:
    """``until`` for code outside an event loop."""
    value = within_sync(condition, timeout, every)
    if not value:
        raise AssertionError(f"condition not met in {timeout} s{': ' + what if what else ''}")
    return value


def quiet_sync(seconds: float) -> None:
    """``quiet`` outside an event loop: let real time pass (another process works meanwhile)."""
    within_sync(lambda: False, seconds, every=seconds)


async def settled(turns: int = 20) -> None:
    """Let the callbacks and tasks already runnable on the loop run (no time passes)."""
    for _ in range(turns):
        await asyncio.sleep(0)
