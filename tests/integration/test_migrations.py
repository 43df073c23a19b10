"""The migrations create exactly the schema of engine/adapters/store/tables.py, plus the tables
slack_sdk's installation and OAuth state stores use (Slack installed through OAuth), on SQLite and
PostgreSQL, and undo it completely."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy.engine import Connection

from engine.adapters.store import SqlStore
from engine.adapters.store.db import Database
from engine.adapters.store.migrate import (
    MIGRATIONS_DIR,
    current_revision,
    downgrade_to_base,
    head_revision,
    upgrade_to_head,
)
from engine.adapters.store.tables import metadata as models

ROOT = Path(__file__).resolve().parents[2]


def _schema() -> sa.MetaData:
    """The models' tables and slack_sdk's own definitions of its stores' tables (0004)."""
    schema = sa.MetaData()
    for table in models.tables.values():
        table.to_metadata(schema)
    SQLAlchemyInstallationStore.build_installations_table(schema, "slack_installations")
    SQLAlchemyInstallationStore.build_bots_table(schema, "slack_bots")
    SQLAlchemyOAuthStateStore.build_oauth_states_table(schema, "slack_oauth_states")
    return schema


metadata = _schema()


def _diff_against(target: sa.MetaData) -> Callable[[Connection], list[Any]]:
    def compare(conn: Connection) -> list[Any]:
        context = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "compare_server_default": True,
                "target_metadata": target,
            },
        )
        diff: list[Any] = compare_metadata(context, target)
        return diff

    return compare


async def _schema_diff(url: str, target: sa.MetaData = metadata) -> list[Any]:
    db = Database(url)
    try:
        async with db.engine.connect() as conn:
            return await conn.run_sync(_diff_against(target))
    finally:
        await db.dispose()


async def _table_names(url: str) -> set[str]:
    db = Database(url)
    try:
        async with db.engine.connect() as conn:
            return set(await conn.run_sync(lambda c: sa.inspect(c).get_table_names()))
    finally:
        await db.dispose()


async def test_upgrade_creates_the_models_schema_and_downgrade_removes_it(db_url: str) -> None:
    assert await current_revision(db_url) is None

    await upgrade_to_head(db_url)

    assert await current_revision(db_url) == head_revision()
    assert await _schema_diff(db_url) == []
    assert await _table_names(db_url) == set(metadata.tables) | {"alembic_version"}

    await downgrade_to_base(db_url)

    assert await _table_names(db_url) == {"alembic_version"}
    assert await current_revision(db_url) is None


async def test_upgrade_twice_is_a_no_op(migrated_db_url: str) -> None:
    await upgrade_to_head(migrated_db_url)

    assert await current_revision(migrated_db_url) == head_revision()
    assert await _schema_diff(migrated_db_url) == []


async def test_concurrent_upgrades_in_one_process_take_turns(db_url: str) -> None:
    # Alembic keeps its running environment in module globals; interleaved commands break it.
    await asyncio.gather(*(upgrade_to_head(db_url) for _ in range(3)))

    assert await current_revision(db_url) == head_revision()


async def test_replicas_migrating_at_once_all_succeed(db_url: str) -> None:
    # Several replicas start together and each runs the migrations: one migrates, the others
    # wait for it (advisory lock / BEGIN IMMEDIATE) and then find nothing to do.
    script = "import asyncio, sys; from engine.adapters.store.migrate import upgrade_to_head; "
    script += "asyncio.run(upgrade_to_head(sys.argv[1]))"
    replicas = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            script,
            db_url,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        for _ in range(4)
    ]
    outputs = await asyncio.gather(*(replica.communicate() for replica in replicas))

    failed = [
        out.decode()[-2000:] for r, (out, _) in zip(replicas, outputs, strict=True) if r.returncode
    ]
    assert failed == []
    assert await current_revision(db_url) == head_revision()
    assert await _schema_diff(db_url) == []


async def test_comparison_sees_type_and_column_drift(migrated_db_url: str) -> None:
    # The no-drift assertion is only worth something if the comparison would notice drift.
    drifted = sa.MetaData()
    for table in metadata.tables.values():
        table.to_metadata(drifted)
    runs = drifted.tables["runs"]
    runs.c.workflow.type = sa.String(100)
    runs.c.lease_expires_at.type = sa.Text()
    runs.append_column(sa.Column("priority", sa.Integer))
    expected = {
        ("modify_type", "workflow"),
        ("modify_type", "lease_expires_at"),
        ("add_column", "priority"),
    }
    if not migrated_db_url.startswith("sqlite"):
        # SQLite stores both as DATETIME and cannot tell; PostgreSQL must see a naive
        # timestamp where the models (UTCDateTime) want TIMESTAMP WITH TIME ZONE.
        runs.c.created_at.type = sa.DateTime(timezone=False)
        expected.add(("modify_type", "created_at"))

    diff = _flatten(await _schema_diff(migrated_db_url, drifted))

    found = {(d[0], d[3]) for d in diff if d[0] == "modify_type"}
    found |= {(d[0], d[3].name) for d in diff if d[0] == "add_column"}
    assert found == expected


def _flatten(diff: list[Any]) -> list[tuple[Any, ...]]:
    # compare_metadata nests column modifications of one table in a list.
    flat: list[tuple[Any, ...]] = []
    for entry in diff:
        flat.extend(entry if isinstance(entry, list) else [entry])
    return flat


def test_the_revisions_form_one_line() -> None:
    # Two revisions written on two branches, each with the same parent, give Alembic two
    # heads: ``upgrade head`` then refuses to run. Each revision must follow the one before.
    scripts = ScriptDirectory(str(MIGRATIONS_DIR))
    revisions = list(reversed(list(scripts.walk_revisions())))
    assert scripts.get_heads() == [head_revision()]
    assert [r.down_revision for r in revisions] == [None, *(r.revision for r in revisions[:-1])]
    assert [r.revision for r in revisions] == [f"{i:04d}" for i in range(1, len(revisions) + 1)]


async def test_the_commands_read_the_revision_as_alembic_does(db_url: str) -> None:
    """Every command checks the schema with ``engine.adapters.store.revision`` (no Alembic
    imported): it must read what Alembic reads, never migrated, at head, and after a full
    downgrade (the version table left empty)."""
    store = SqlStore(Database(db_url))
    try:
        assert await store.schema_revision() is None
        await upgrade_to_head(db_url)
        assert await store.schema_revision() == await current_revision(db_url) == head_revision()
        await downgrade_to_base(db_url)
        assert await store.schema_revision() is None is await current_revision(db_url)
    finally:
        await store.db.dispose()


def test_the_head_is_the_one_revision_no_script_follows(tmp_path: Path) -> None:
    def script(name: str, revision: str, down: str) -> None:
        (tmp_path / f"{name}.py").write_text(
            f'"""{name}"""\nrevision: str = "{revision}"\n'
            f"down_revision: str | Sequence[str] | None = {down}\n"
        )

    script("0001_a", "0001", "None")
    script("0002_b", "0002", '"0001"')
    assert head_revision(tmp_path) == "0002"
    script("0003_c", "0003", '"0001"')  # a second branch from 0001: two heads
    with pytest.raises(RuntimeError, match=r"have heads \['0002', '0003'\], not one"):
        head_revision(tmp_path)
    script("0004_merge", "0004", '("0002", "0003")')  # a merge revision follows both
    assert head_revision(tmp_path) == "0004"
