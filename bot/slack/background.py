"""Work that follows an acknowledgement: ephemeral replies, opening a modal, permalinks.

Slack needs the HTTP answer to an interaction within 3 s, so a handler commits its decision,
acknowledges, and leaves the slow Web API calls to tasks started here. The tasks are kept
(asyncio holds only weak references to running tasks), their failures are logged (and handed
to ``on_failure``, so that a follow-up that crashes can still tell the clicker), and the app
waits for them at shutdown before it closes the HTTP session they use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


class Background:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(
        self,
        work: Coroutine[Any, Any, None],
        name: str,
        *,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Run ``work`` after the acknowledgement; if it raises, log it and call
        ``on_failure`` with the exception (not on cancellation at shutdown)."""
        task = asyncio.get_running_loop().create_task(work, name=f"signoff-slack-{name}")
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._done(done, on_failure))

    def _done(
        self, task: asyncio.Task[None], on_failure: Callable[[BaseException], None] | None
    ) -> None:
        self._tasks.discard(task)
        if task.cancelled() or (exc := task.exception()) is None:
            return
        log.error("Slack follow-up %s failed", task.get_name(), exc_info=exc)
        if on_failure is not None:
            try:
                on_failure(exc)
            except Exception:
                log.exception("telling the clicker that %s failed failed", task.get_name())

    async def drain(self, timeout: float = 5.0) -> None:
        """Let running follow-ups finish (up to ``timeout``), then cancel what is left."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def __len__(self) -> int:
        return len(self._tasks)
