"""Alembic environment for Signoff, configured in code (there is no alembic.ini).

``engine.adapters.store.migrate`` builds the ``Config`` and runs Alembic's (synchronous) commands
in a worker thread; this module then starts its own event loop there with ``asyncio.run`` and drives
the async engine of ``engine.adapters.store.db.Database``, so the SQLite pragmas (WAL, busy_timeout,
foreign keys) apply to migrations exactly as they do to the running service.

One upgrade or downgrade is one transaction (``Database.transact``) on both dialects (SQLite's DDL
is transactional, Alembic just does not assume so), and it is serialised between processes: on
PostgreSQL by a transaction-level advisory lock, so replicas starting together migrate once; on
SQLite by ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context
from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.pool import ConnectionPoolEntry

from engine.adapters.store.db import Database
from engine.adapters.store.tables import metadata

config = context.config
target_metadata = metadata

# An arbitrary constant: the key of the advisory lock that serialises migrations on PostgreSQL.
_PG_MIGRATION_LOCK = 0x5167_0FF0


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: build the config with engine.store.migrate")
    return url


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def run_migrations_offline() -> None:
    """Write the migration SQL to stdout instead of running it (``alembic upgrade --sql``)."""
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=_is_sqlite(url),
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _foreign_keys_off(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    # Batch mode rebuilds a table (create a copy, drop the old one, rename). With foreign keys
    # enforced, dropping a referenced table deletes through the references and fails, so
    # SQLite's own ALTER recipe turns enforcement off around the change and runs
    # foreign_key_check before committing. The pragma is a no-op inside a transaction, hence
    # here, when the connection is made (after Database's own pragmas, which turned it on).
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=OFF")
    finally:
        cursor.close()


def _migrate(connection: Connection) -> None:
    # Runs inside Database.transact's transaction, which Alembic sees as external: the whole
    # upgrade commits or rolls back as one.
    sqlite = connection.dialect.name == "sqlite"
    if not sqlite:
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=sqlite,
        compare_type=True,
    )
    context.run_migrations()
    if sqlite:
        broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"migration left dangling foreign keys: {broken[:5]}")


async def _run_online(url: str) -> None:
    # An engine of its own, used for this migration only: the pragma change cannot leak.
    database = Database(url)
    if database.sync_engine is not None:
        event.listen(database.sync_engine, "connect", _foreign_keys_off)
    try:
        # A write transaction: BEGIN IMMEDIATE on SQLite, so concurrent migrators queue on the
        # file lock instead of deadlocking, and transient errors are retried as a whole.
        await database.transact(_migrate)
    finally:
        await database.dispose()


def run_migrations_online() -> None:
    """Migrate a live database, from a thread that has no event loop running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "Alembic commands block; call them through engine.store.migrate "
            "(it runs them in a worker thread), not from inside an event loop"
        )
    asyncio.run(_run_online(_url()))


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
