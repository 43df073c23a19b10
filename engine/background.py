"""One background task per service (sweeper, outbox dispatcher, database clock): started with
the engine, cancelled when it stops.

Outside the layers on purpose: services (workers, delivery), adapters (the database clock, the
PostgreSQL listener) and front ends all run loops, and adapters never import services. It
imports nothing of the engine."""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it has ended. A cancellation of the caller that arrives
    meanwhile is passed on, not swallowed with the task's own: ``suppress(CancelledError)``
    around the wait would swallow both, and the caller would go on running. A caller that was
    already being cancelled when it called (cleanup in a cancelled task: ``run_app`` stops
    the server so) carries on with its cleanup."""
    if task.done():
        if not task.cancelled():
            task.result()
        return
    current = asyncio.current_task()
    before = current.cancelling() if current is not None else 0
    task.cancel()
    while not task.done():
        try:
            await asyncio.wait({task}, timeout=_AGAIN_SECONDS)
        except asyncio.CancelledError:
            if current is not None and current.cancelling() > before:
                raise
        if not task.done():
            # It swallowed the cancellation (a driver turned it into an error of its own that
            # the task's loop caught and retried): cancel it again rather than wait forever.
            task.cancel()
    if not task.cancelled():
        task.result()  # its own error, as ``await task`` would raise it


_AGAIN_SECONDS = 1.0


class BackgroundLoop:
    """A service whose ``_loop`` runs as one task between ``start`` and ``stop``."""

    task_name = "signoff-background"
    _task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=self.task_name)

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
