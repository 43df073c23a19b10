"""Schema migrations: Alembic, configured in code, driven from async code.

The scripts live in the repository's ``migrations/`` directory (``env.py`` plus ``versions/``);
there is no ``alembic.ini``. Alembic's command API is synchronous and ``env.py`` runs its own
event loop, so each command runs in a worker thread. A new revision is drafted against a database
at head with::

    python -c "from alembic import command; from engine.store.migrate import alembic_config; \
command.revision(alembic_config(URL), 'message', autogenerate=True, rev_id='0002')"

and then read and cleaned by hand (see ``versions/0001_initial.py``); revisions are numbered.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from engine.adapters.store.db import Database
from engine.adapters.store.revision import MIGRATIONS_DIR as MIGRATIONS_DIR
from engine.adapters.store.revision import head_revision as head_revision  # read without Alembic

# Alembic keeps the running environment in module globals (``alembic.context``, ``alembic.op``):
# two commands at once in one process, even on different databases, corrupt each other.
_alembic_lock = threading.Lock()


def alembic_config(url: str) -> Config:
    """An Alembic config for the database at ``url`` and the repository's migration scripts."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # The option value goes through configparser interpolation: a literal % must be doubled
    # (percent-encoded passwords in URLs).
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


async def upgrade_to_head(url: str) -> None:
    """Apply every migration the database does not have yet (idempotent)."""
    await asyncio.to_thread(_one_at_a_time, command.upgrade, alembic_config(url), "head")


async def downgrade_to_base(url: str) -> None:
    """Undo every migration: the database is left with only Alembic's version table."""
    await asyncio.to_thread(_one_at_a_time, command.downgrade, alembic_config(url), "base")


def _one_at_a_time(run: Callable[[Config, str], None], config: Config, revision: str) -> None:
    with _alembic_lock:
        run(config, revision)


async def current_revision(url: str) -> str | None:
    """The revision the database is at, or None if it was never migrated."""
    database = Database(url)
    try:
        async with database.engine.connect() as connection:
            return await connection.run_sync(
                lambda sync: MigrationContext.configure(sync).get_current_revision()
            )
    finally:
        await database.dispose()
