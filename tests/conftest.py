"""Shared fixtures: real databases, SQLite always and PostgreSQL when configured.

    db_url           an empty database's URL, once per dialect (ids ``sqlite``, ``postgres``)
    migrated_db_url  the same, upgraded to the newest migration
    database         an ``engine.adapters.store.db.Database`` on ``migrated_db_url``, disposed
    afterwards sqlite_url       an empty SQLite file's URL, for tests that need one database only

PostgreSQL: every test gets a database of its own, created on the server named by
``SIGNOFF_TEST_POSTGRES_URL`` and dropped afterwards. A migrated database is a copy of one
migrated once per session (``CREATE DATABASE ... TEMPLATE``; on SQLite a copy of the file):
the migrations themselves are tested from an empty ``db_url`` in test_migrations.py. Unset,
the ``postgres`` cases skip; set but unreachable, they skip with the reason, or fail when
``SIGNOFF_REQUIRE_POSTGRES=1`` (CI).
The environment is read here and nowhere below: the code under test takes URLs.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NoReturn

import pytest
from sqlalchemy import make_url
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from engine.adapters.store import SqlStore
from engine.adapters.store.db import Database
from engine.adapters.store.migrate import upgrade_to_head

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


# The migrated templates of this session: PostgreSQL's database name, SQLite's file.
_templates: dict[str, str] = {}


def _admin_engine(server: URL) -> AsyncEngine:
    connect_args = {"timeout": _CONNECT_TIMEOUT_S} if server.drivername.endswith("asyncpg") else {}
    return create_async_engine(
        server, isolation_level="AUTOCOMMIT", poolclass=NullPool, connect_args=connect_args
    )


async def _postgres_template(server: URL) -> str:
    """A database migrated to head, made once per session and copied by each test."""
    if "postgres" not in _templates:
        name = f"signoff_tpl_{secrets.token_hex(6)}"
        admin = _admin_engine(server)
        try:
            async with admin.connect() as conn:
                await conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        finally:
            await admin.dispose()
        await upgrade_to_head(server.set(database=name).render_as_string(hide_password=False))
        _templates["postgres"] = name
    return _templates["postgres"]


@pytest.fixture(scope="session", autouse=True)
def _drop_templates() -> Iterator[None]:
    yield
    name = _templates.pop("postgres", None)
    if name is not None:

        async def drop() -> None:
            admin = _admin_engine(_server_url())
            try:
                async with admin.connect() as conn:
                    await conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await admin.dispose()

        asyncio.run(drop())


@asynccontextmanager
async def _fresh_postgres_database(*, migrated: bool = False) -> AsyncIterator[str]:
    server = _server_url()
    admin = _admin_engine(server)
    name = f"signoff_t_{secrets.token_hex(6)}"
    try:
        unreachable = None
        try:
            template = f' TEMPLATE "{await _postgres_template(server)}"' if migrated else ""
            async with admin.connect() as conn:
                await conn.exec_driver_sql(f'CREATE DATABASE "{name}"{template}')
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


async def _sqlite_template(factory: pytest.TempPathFactory) -> Path:
    if "sqlite" not in _templates:
        directory = factory.mktemp("template")
        await upgrade_to_head(_sqlite_file_url(directory))
        _templates["sqlite"] = str(directory / "signoff.db")
    return Path(_templates["sqlite"])


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def dialect(request: pytest.FixtureRequest) -> str:
    """``sqlite`` and ``postgres``: the tests taking a database run once on each."""
    return str(request.param)


@pytest.fixture
async def db_url(dialect: str, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of an empty database of its own, on SQLite and on PostgreSQL."""
    if dialect == "sqlite":
        yield _sqlite_file_url(tmp_path)
        return
    async with _fresh_postgres_database() as url:
        yield url


@pytest.fixture
async def migrated_db_url(
    dialect: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """The URL of a database of its own with every migration applied."""
    if dialect == "sqlite":
        template = await _sqlite_template(tmp_path_factory)
        shutil.copyfile(template, tmp_path / "signoff.db")  # WAL checkpointed at dispose
        yield _sqlite_file_url(tmp_path)
        return
    async with _fresh_postgres_database(migrated=True) as url:
        yield url


@pytest.fixture
async def database(migrated_db_url: str) -> AsyncIterator[Database]:
    """A ``Database`` on a migrated database, disposed after the test."""
    db = Database(migrated_db_url)
    try:
        yield db
    finally:
        await db.dispose()


@pytest.fixture
def store(database: Database) -> SqlStore:
    """The SQL store on ``database`` (a migrated database, on SQLite and on PostgreSQL)."""
    return SqlStore(database)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of an empty SQLite file of its own, for tests that need one dialect only."""
    return _sqlite_file_url(tmp_path)


@pytest.fixture
async def migrated_postgres_url() -> AsyncIterator[str]:
    """A migrated PostgreSQL database of its own, for what only PostgreSQL does (several
    replicas, LISTEN/NOTIFY, SKIP LOCKED)."""
    async with _fresh_postgres_database(migrated=True) as url:
        yield url
