"""``cancel_and_wait``: cancelling a helper task from a task that is itself being cancelled
must not swallow the outer cancellation (the outbox dispatcher once kept running after
``stop`` because its heartbeat's CancelledError was suppressed together with its own)."""

from __future__ import annotations

import asyncio
import contextlib

from engine.background import cancel_and_wait
from tests.support.waiting import settled


async def forever() -> None:
    """Wait until cancelled (what a long sleep stood for, with no time involved)."""
    await asyncio.Event().wait()


async def _worker(cleanup: str) -> None:
    helper = asyncio.create_task(forever())
    try:
        await forever()
    finally:
        if cleanup == "suppress":
            helper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await helper
        else:
            await cancel_and_wait(helper)
        await forever()  # only reached when the outer cancellation was swallowed


async def _stops(cleanup: str) -> bool:
    task = asyncio.create_task(_worker(cleanup))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)  # the cancellation reaches the worker while it waits for the helper
    task.cancel()  # and once more, as a second stop() would
    done, _ = await asyncio.wait([task], timeout=0.5)
    if not done:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return bool(done) and task.cancelled()


async def test_the_callers_cancellation_is_passed_on() -> None:
    assert await _stops("cancel_and_wait")


async def test_a_helper_that_ends_by_itself_is_just_waited_for() -> None:
    async def quick() -> None:
        await asyncio.sleep(0)

    task = asyncio.create_task(quick())
    await settled()
    await cancel_and_wait(task)  # already done: nothing raised
    assert task.done()


async def test_cleanup_inside_a_cancelled_task_goes_on() -> None:
    """``run_app`` cancels its main task on SIGTERM and runs the cleanup in it: stopping the
    workers there must still wait for them, not give up at the first helper."""
    steps: list[str] = []

    async def main() -> None:
        try:
            await forever()
        finally:
            helper = asyncio.create_task(forever())
            await cancel_and_wait(helper)
            steps.append("helper stopped")
            await asyncio.sleep(0)  # an await that yields: a cancellation passed on ends here
            steps.append("cleanup finished")

    task = asyncio.create_task(main())
    await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert steps == ["helper stopped", "cleanup finished"]


async def test_a_task_that_swallows_a_cancellation_is_cancelled_again(monkeypatch) -> None:
    """A loop whose driver turns the cancellation into an error of its own, which the loop
    catches and retries (as a reconnect loop does), still ends: ``stop`` never hangs."""
    monkeypatch.setattr("engine.background._AGAIN_SECONDS", 0.01)
    swallowed = 0

    async def retrying() -> None:
        nonlocal swallowed
        while True:
            try:
                await forever()
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed += 1  # the first one is lost, as ConnectionError("closed") would be

    task = asyncio.create_task(retrying())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task), timeout=5)
    assert task.cancelled() and swallowed == 1
