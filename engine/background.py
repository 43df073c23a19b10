"""One background task per service (sweeper, outbox dispatcher, database clock): started with
the engine, cancelled when it stops."""

from __future__ import annotations

import asyncio
import contextlib


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
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
