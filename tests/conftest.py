"""Shared fixtures: real databases, SQLite always and PostgreSQL when configured.

    db_url           an empty database's URL, once per dialect (ids ``sqlite``, ``postgres``)
    migrated_db_url  the same, upgraded to the newest migration
    database         an ``engine.store.db.Database`` on ``migrated_db_url``, disposed afterwards
    sqlite_url       an empty SQLite file's URL, for tests that need one database only

PostgreSQL: every test gets a database of its own, created on the server named by
``SIGNOFF_TEST_POSTGRES_URL`` and dropped afterwards. Unset, the ``postgres`` cases skip; set
but unreachable, they skip with the reason, or fail when ``SIGNOFF_REQUIRE_POSTGRES=1`` (CI).
The environment is read here and nowhere below: the code under test takes URLs.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NoReturn

import pytest
from sqlalchemy import make_url
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from engine.store.db import Database
from engine.store.migrate import upgrade_to_head

POSTGRES_URL_VAR = "SIGNOFF_TEST_POSTGRES_URL"
REQUIRE_POSTGRES_VAR = "SIGNOFF_REQUIRE_POSTGRES"
_CONNECT_TIMEOUT_S = 5


def _postgres_unavailable(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_POSTGRES_VAR) == "1":
        pytest.fail(f"{reason} (and {REQUIRE_POSTGRES_VAR}=1)", pytrace=False)
    pytest.skip(reason)


def _server_url() -> URL:
    raw = os.environ.get(POSTGRES_URL_VAR)
    if not raw:
        _postgres_unavailable(f"PostgreSQL not configured: set {POSTGRES_URL_VAR}")
    url = make_url(raw)
    if url.drivername == "postgresql":  # the service runs on asyncpg; accept a bare URL too
        url = url.set(drivername="postgresql+asyncpg")
    return url


@asynccontextmanager
async def _fresh_postgres_database() -> AsyncIterator[str]:
    server = _server_url()
    connect_args = {"timeout": _CONNECT_TIMEOUT_S} if server.drivername.endswith("asyncpg") else {}
    admin = create_async_engine(
        server, isolation_level="AUTOCOMMIT", poolclass=NullPool, connect_args=connect_args
    )
    name = f"signoff_t_{secrets.token_hex(6)}"
    try:
        unreachable = None
        try:
            async with admin.connect() as conn:
                await conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        except (OSError, TimeoutError, DBAPIError) as exc:
            unreachable = exc
        if unreachable is not None:  # reported outside the except: no chained traceback
            where = server.render_as_string(hide_password=True)
            _postgres_unavailable(f"PostgreSQL at {where} unreachable: {unreachable}")
        try:
            yield server.set(database=name).render_as_string(hide_password=False)
        finally:
            async with admin.connect() as conn:
                await conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.dispose()


def _sqlite_file_url(directory: Path) -> str:
    return f"sqlite+aiosqlite:///{directory}/signoff.db"


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of an empty database of its own, on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        yield _sqlite_file_url(tmp_path)
        return
    async with _fresh_postgres_database() as url:
        yield url


@pytest.fixture
async def migrated_db_url(db_url: str) -> str:
    """``db_url`` with every migration applied."""
    await upgrade_to_head(db_url)
    return db_url


@pytest.fixture
async def database(migrated_db_url: str) -> AsyncIterator[Database]:
    """A ``Database`` on a migrated database, disposed after the test."""
    db = Database(migrated_db_url)
    try:
        yield db
    finally:
        await db.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of an empty SQLite file of its own, for tests that need one dialect only."""
    return _sqlite_file_url(tmp_path)


@pytest.fixture
async def migrated_postgres_url() -> AsyncIterator[str]:
    """A migrated PostgreSQL database of its own, for what only PostgreSQL does (several
    replicas, LISTEN/NOTIFY, SKIP LOCKED)."""
    async with _fresh_postgres_database() as url:
        await upgrade_to_head(url)
        yield url
