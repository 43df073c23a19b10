"""A process advances a run with one task at most: a claim that takes back a run one of its
tasks still advances (the lease ran out under it) starts no second task; the run is advanced
again once that task has ended, from what was committed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from engine.services.workers import Workers
from tests.support.clock import ManualClock


class NoStore:
    """A store for workers that only advance runs: an attempt is made once."""

    async def outlast_outage(self, attempt: Callable[[], Awaitable[Any]], **_: Any) -> Any:
        return await attempt()


class HeldInterpreter:
    """Advances a run by waiting until the test lets it go; notes every advance."""

    def __init__(self) -> None:
        self.advances: list[tuple[str, Any]] = []
        self.running = 0
        self.most_at_once = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def advance(self, run_id: str, owner: str, written: Any = None) -> None:
        self.advances.append((run_id, written))
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        self.started.set()
        try:
            await self.release.wait()
        finally:
            self.running -= 1


async def test_a_run_claimed_again_under_its_task_is_advanced_again_only_after_it() -> None:
    interpreter = HeldInterpreter()
    workers = Workers(NoStore(), interpreter, ManualClock(), owner="w")  # type: ignore[arg-type]
    workers._spawn("r-1", "as first claimed")
    await asyncio.wait_for(interpreter.started.wait(), 5)

    workers._spawn("r-1", "as claimed again")
    assert workers.active == 1  # no second task while the first advances the run

    interpreter.release.set()
    for _ in range(100):
        if len(interpreter.advances) == 2 and workers.active == 0:
            break
        await asyncio.sleep(0)
    assert interpreter.advances == [("r-1", "as first claimed"), ("r-1", None)]
    assert interpreter.most_at_once == 1
    assert workers.active == 0


async def test_a_task_cancelled_before_it_started_leaves_its_run_free_to_advance() -> None:
    interpreter = HeldInterpreter()
    workers = Workers(NoStore(), interpreter, ManualClock(), owner="w")  # type: ignore[arg-type]
    workers._spawn("r-1")
    for task in list(workers._active):
        task.cancel()  # before it ran a single step (a stop during the spawn)
    for _ in range(10):
        await asyncio.sleep(0)
    assert workers.active == 0 and interpreter.advances == []

    workers._spawn("r-1", "claimed after the stop")
    await asyncio.wait_for(interpreter.started.wait(), 5)
    assert interpreter.advances == [("r-1", "claimed after the stop")]
    interpreter.release.set()
