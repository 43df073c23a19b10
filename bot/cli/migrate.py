"""``signoff migrate``: upgrade the database to the newest schema."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot.cli.checks import add_config, load


def add_parser(sub: Any) -> None:
    migrate = sub.add_parser("migrate", help="upgrade the database to the newest schema")
    add_config(migrate)
    migrate.set_defaults(func=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> int:
    import asyncio

    from engine.assembly import migrate_database, schema_head

    config = load(args.config)
    try:
        asyncio.run(migrate_database(config.database.url))
    except Exception as exc:
        print(f"migration failed: {exc}", file=sys.stderr)
        return 1
    print(f"database at revision {schema_head()}")
    return 0
