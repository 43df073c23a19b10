"""What the ``signoff`` commands check before they act: one loader for ``app.yaml`` and one look
at the database's migration, so that ``check``, ``migrate``, ``serve`` and the rest refuse the
same problems in the same words.

* ``load`` reads the file; every problem, a malformed policy rule included (``decision: blok``),
  is one ``config error:`` line naming its YAML path, and the command exits 2. The loader keeps a
  malformed rule (the policy engine fails closed on it); the commands refuse to start with one.
* ``database_problem`` says why the database is not ready for the code (never migrated, behind,
  or unreachable) without changing it: a SQLite file that does not exist is not created.
  ``require_migrated`` turns that into one line and exit 2 for the commands that use the
  database (``token``, ``demo``, ``login-link``). ``serve`` refuses an unmigrated database the
  same way (or migrates it first with ``--migrate``), but starts on one it cannot reach yet,
  alive but not ready (``/readyz`` says why).

``require_config_file`` is what every command says when there is no file at all.
``add_config`` is every command's ``--config`` option. Nothing here imports the web server or a
chat SDK (``signoff --help`` stays fast).
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import TYPE_CHECKING

from engine.domain.errors import ConfigError

if TYPE_CHECKING:
    import argparse

    from engine.config import AppConfig

EXIT_CONFIG = 2
NOT_MIGRATED = "database not migrated: run `signoff migrate`"
DEFAULT_CONFIG = "app.yaml"


def add_config(parser: argparse.ArgumentParser) -> None:
    """The ``--config`` option every command that reads ``app.yaml`` takes."""
    parser.add_argument(
        "--config",
        default=os.environ.get("SIGNOFF_CONFIG", DEFAULT_CONFIG),
        help="path of app.yaml (default: $SIGNOFF_CONFIG or ./app.yaml)",
    )


def config_option(path: str) -> str:
    """`` --config PATH`` for a command to read ``path``, or nothing when it is the default."""
    default = os.environ.get("SIGNOFF_CONFIG", DEFAULT_CONFIG)
    return "" if path == default else f" --config {shlex.quote(path)}"


def require_config_file(path: str) -> None:
    """Exit 2 with one line saying what to do when there is no file at ``path``: a first run
    in a folder without ``app.yaml`` should learn of ``signoff init``, not read ``[Errno 2]``."""
    if os.path.exists(path):
        return
    print(
        f"error: no configuration at {path}: pass --config PATH, set SIGNOFF_CONFIG, "
        f'or run "signoff init{config_option(path)}" to write a starter '
        f"{os.path.basename(path)}",
        file=sys.stderr,
    )
    raise SystemExit(EXIT_CONFIG)


def load(path: str) -> AppConfig:
    """The configuration at ``path``, or exit 2 with one line per problem."""
    from engine.config import load_config

    require_config_file(path)
    try:
        config = load_config(path, os.environ)
    except ConfigError as exc:
        _refuse(exc.problems)
    if config.rule_problems:
        _refuse(config.rule_problems)
    return config


def _refuse(problems: tuple[str, ...] | list[str]) -> None:
    for problem in problems:
        print(f"config error: {problem}", file=sys.stderr)
    raise SystemExit(EXIT_CONFIG)


async def database_state(config: AppConfig) -> tuple[str | None, str]:
    """``(problem, dialect and revision)``: ``problem`` is None when the schema is the code's."""
    import asyncio

    from engine.standalone import database_dialect, schema_head, schema_revision, sqlite_file

    url = config.database.url
    path = sqlite_file(url)
    if path is not None and not os.path.exists(path):
        return f"{NOT_MIGRATED} ({path} does not exist yet)", "sqlite"
    dialect = database_dialect(url)
    try:
        revision = await asyncio.wait_for(schema_revision(url), 10)
    except Exception as exc:
        return f"database unreachable ({type(exc).__name__}: {exc})", dialect
    head = schema_head()
    if revision is None:
        return NOT_MIGRATED, dialect
    if revision != head:
        return (
            f"{NOT_MIGRATED} (it is at revision {revision}, this version needs {head})",
            dialect,
        )
    return None, f"{dialect}, revision {revision}"


def require_migrated(config: AppConfig) -> None:
    """Exit with one line unless the database is migrated (it is left as it was): 2 when it
    is not migrated, 1 when it cannot be reached."""
    import asyncio

    problem, _ = asyncio.run(database_state(config))
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG if problem.startswith(NOT_MIGRATED) else 1)


def person_problem(config: AppConfig, person: str | None, belongs: str) -> str | None:
    """Why ``--person`` names nobody (None when it names someone in people:). A group is named
    as one: ``belongs`` says what a person is needed for (a token acts as one person, never as a
    group's members)."""
    if person is None or person in config.people:
        return None
    if person in config.groups:
        members = ", ".join(config.groups[person]) or "nobody"
        return (
            f"--person {person!r} is a group (in groups:), not a person: {belongs} "
            f"({person}: {members})"
        )
    listed = ", ".join(config.people) or "nobody"
    return f"--person {person!r} is not in people: (people: {listed})"
