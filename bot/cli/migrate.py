"""``signoff migrate``: upgrade the database to the newest schema, and say in one line whether
it changed anything (Alembic's own log lines are kept quiet, ``bot.cli.main``)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from bot.cli.checks import add_config, load

if TYPE_CHECKING:
    from engine.config import AppConfig


def add_parser(sub: Any) -> None:
    migrate = sub.add_parser("migrate", help="upgrade the database to the newest schema")
    add_config(migrate)
    migrate.set_defaults(func=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> int:
    return migrate(load(args.config))


def migrate(config: AppConfig) -> int:
    """Bring the database to the newest schema: 0, or 1 with one line saying why it failed.
    ``signoff migrate`` and ``signoff serve --migrate`` both run this."""
    import asyncio

    from engine.standalone import migrate_database, schema_head

    url = config.database.url
    head = schema_head()
    try:
        before = asyncio.run(_revision_before(url))
        asyncio.run(migrate_database(url))
    except Exception as exc:
        print(f"migration failed: {exc}", file=sys.stderr)
        return 1
    if before == head:
        print(f"database already up to date (revision {head})")
    else:
        print(f"database migrated to revision {head}")
    return 0


async def _revision_before(url: str) -> str | None:
    """The revision before migrating; None when never migrated. A SQLite file that does not
    exist yet is not opened (opening it would create it before the migration does)."""
    import os

    from engine.standalone import schema_revision, sqlite_file

    path = sqlite_file(url)
    if path is not None and not os.path.exists(path):
        return None
    return await schema_revision(url)
