"""Replicas wake each other with PostgreSQL LISTEN/NOTIFY; polling stays as the fallback.

Every transaction that makes a run ready (or queues chat messages) calls
``engine.adapters.store.db.mark_ready``; ``Database.transact`` then sends ``NOTIFY`` inside that
transaction, so the notification goes out exactly when the change commits. Its payload says
what is ready: a queued run wakes the other replicas' workers only, a chat message their
dispatchers only (each wake-up costs a claim, a round trip per replica). Each replica keeps
one listening connection and reconnects when it drops. SQLite has one process: there the wake-up
is the in-process event alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import make_url

from engine.adapters.store.db import OUTBOX_READY, READY_CHANNEL, RUNS_READY
from engine.background import cancel_and_wait

log = logging.getLogger(__name__)


class PgListener:
    """Calls ``on_runs`` when a replica commits ready runs, ``on_outbox`` when it commits chat
    messages (a notification's payload says which; an empty one, both)."""

    def __init__(
        self, url: str, on_runs: Callable[[], None], on_outbox: Callable[[], None]
    ) -> None:
        u = make_url(url)
        self._dsn = u.set(drivername="postgresql").render_as_string(hide_password=False)
        self._on_runs = on_runs
        self._on_outbox = on_outbox
        self._task: asyncio.Task[None] | None = None
        # Set once the first connection listens (and caught up) or failed: ``Engine.start``
        # waits for it, so the catch-up wake-up comes before the workers' first claim.
        self.first_attempt = asyncio.Event()

    def notified(self, payload: str = "") -> None:
        kinds = set(payload.split(",")) if payload else {RUNS_READY, OUTBOX_READY}
        if RUNS_READY in kinds:
            self._on_runs()
        if OUTBOX_READY in kinds:
            self._on_outbox()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="signoff-pg-listener")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)

    async def _run(self) -> None:
        import asyncpg  # only the PostgreSQL deployment needs it loaded

        delay = 0.5
        while True:
            conn: Any = None
            try:
                conn = await asyncpg.connect(self._dsn)
                lost = asyncio.Event()
                conn.add_termination_listener(lambda _c, lost=lost: lost.set())
                await conn.add_listener(
                    READY_CHANNEL, lambda _conn, _pid, _channel, payload: self.notified(payload)
                )
                delay = 0.5
                self.notified()  # whatever was committed while we were not listening
                self.first_attempt.set()
                await lost.wait()
                log.warning("LISTEN connection lost; reconnecting")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("LISTEN connection failed (%s); polling until it is back", exc)
                self.first_attempt.set()
            finally:
                if conn is not None and not conn.is_closed():
                    with contextlib.suppress(Exception):
                        await conn.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
