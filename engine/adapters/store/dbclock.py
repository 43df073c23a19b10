"""A clock that follows the database's: every replica reads the same time, whatever its own
clock says. Expiry is a comparison between ``expiresAt`` (written by one replica) and "now"
(read by another, or by the sweeper); with each replica's local clock corrected by the offset to
the database's, a replica ten minutes off still expires a request exactly when the others do.

The offset is measured at start and every minute (half the round trip is taken as the query's
moment); between measurements ``now()`` is the local clock plus the offset, so reading the time
costs nothing.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.engine import Connection

from engine.adapters.store.db import Database
from engine.background import BackgroundLoop
from engine.ports import Clock

log = logging.getLogger(__name__)

_DB_NOW = text("SELECT CURRENT_TIMESTAMP")


class DatabaseClock(BackgroundLoop):
    task_name = "signoff-db-clock"

    def __init__(self, db: Database, local: Clock, *, resync_seconds: float = 60.0) -> None:
        self.db = db
        self.local = local
        self.resync_seconds = resync_seconds
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return self.local.now() + self.offset

    async def sleep(self, seconds: float) -> None:
        """The local clock's sleep: an offset moves the time read, not how long a wait is."""
        await self.local.sleep(seconds)

    async def sync(self) -> timedelta:
        """Measure the offset to the database's clock; returns it."""

        def read(conn: Connection) -> datetime:
            value = conn.execute(_DB_NOW).scalar_one()
            assert isinstance(value, datetime) and value.tzinfo is not None
            return value

        before = self.local.now()
        db_now = await self.db.transact(read, write=False)
        after = self.local.now()
        self.offset = db_now - (before + (after - before) / 2)
        return self.offset

    async def _loop(self) -> None:
        while True:
            await self.local.sleep(self.resync_seconds)  # the local clock, as ``sleep``
            try:
                await self.sync()
            except Exception as exc:  # keep the last offset; the next try may succeed
                log.warning("could not read the database clock: %s", exc)
