"""The schema's revision read without Alembic: the row of Alembic's version table, and the
newest of the scripts in ``migrations/versions``.

Every command that touches the database first checks that it is migrated; importing Alembic
for that cost a fifth of a second at each start, more than the check itself. Migrating still
goes through Alembic (``migrate.py``); ``tests/integration/test_migrations.py`` holds both
readings to Alembic's own.
"""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

MIGRATIONS_DIR = Path(__file__).resolve().parents[3] / "migrations"
VERSION_TABLE = "alembic_version"  # Alembic's default; migrations/env.py keeps it

# ``revision: str = "0003"`` and ``down_revision: str | Sequence[str] | None = "0002"``, as
# ``alembic revision`` writes them at the top of each script.
_REVISION = re.compile(r"^revision\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)
_DOWN_REVISION = re.compile(r"^down_revision\s*(?::[^=\n]*)?=\s*(.+)$", re.MULTILINE)
_QUOTED = re.compile(r"['\"]([^'\"]+)['\"]")


def head_revision(versions: Path = MIGRATIONS_DIR / "versions") -> str:
    """The one revision no other script follows; ``RuntimeError`` when there is none or more
    than one (Alembic's ``upgrade head`` would refuse those too)."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for script in sorted(versions.glob("*.py")):
        source = script.read_text(encoding="utf-8")
        if (revision := _REVISION.search(source)) is None:
            continue
        revisions.add(revision.group(1))
        if (down := _DOWN_REVISION.search(source)) is not None:
            followed.update(_QUOTED.findall(down.group(1)))
    heads = sorted(revisions - followed)
    if len(heads) != 1:
        raise RuntimeError(f"the migration scripts in {versions} have heads {heads}, not one")
    return heads[0]


def current_revision(conn: Connection) -> str | None:
    """The revision the database is at; None when it was never migrated (no version table, or
    an empty one)."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    rows = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(rows) > 1:
        raise RuntimeError(f"the database is at several revisions at once: {sorted(rows)}")
    return str(rows[0]) if rows else None
