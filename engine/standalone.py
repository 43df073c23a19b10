"""The database without the engine: what the commands that run no engine need (``signoff
migrate``, ``check``, ``token``, ``login-link``): the schema's revision and head, migrating,
and the API tokens, with the wall clock to date them.

``engine.assembly`` builds the whole engine and imports every service, the HTTP client and the
connectors; a command that only reads a table should not pay for that at every start. This
module imports the SQL store and nothing else of the engine; ``engine.assembly`` re-exports it
for the front ends that hold an engine anyway.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from engine.adapters.clock import SystemClock as SystemClock  # the commands date with it
from engine.adapters.store import Database, SqlStore
from engine.adapters.store.db import sqlite_file as sqlite_file  # for bot/cli/checks.py
from engine.services.tokens import Tokens


def schema_head() -> str:
    """The newest migration revision of this code."""
    from engine.adapters.store.revision import head_revision  # not migrate: no Alembic

    return head_revision()


async def migrate_database(url: str) -> None:
    """Upgrade the database at ``url`` to the newest schema (idempotent)."""
    from engine.adapters.store.migrate import upgrade_to_head

    await upgrade_to_head(url)


def database_dialect(url: str) -> str:
    """``sqlite`` or ``postgresql``, from the URL alone."""
    return Database(url).dialect


async def schema_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at (None: never migrated), without changing it;
    raises what reaching it raised."""
    db = Database(url)
    try:
        return await SqlStore(db).schema_revision()
    finally:
        await db.dispose()


@contextlib.asynccontextmanager
async def open_tokens(url: str) -> AsyncIterator[Tokens]:
    """The API tokens of the database at ``url``, for a command that runs no engine."""
    db = Database(url)
    try:
        yield Tokens(SqlStore(db))
    finally:
        await db.dispose()
