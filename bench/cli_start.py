"""How long each ``signoff`` command takes next to ``python -c pass``; print the figures.

    python bench/cli_start.py [--runs 7]

Every command a person types often runs ``--runs`` times as a fresh process (the same
interpreter as this script, ``-m bot.cli`` as the installed ``signoff`` script does it), on a
temporary folder with an ``app.yaml`` and a migrated SQLite database: ``--help``, ``token
create``, ``token list``, ``token revoke``, ``login-link``, ``migrate`` (already up to date) and
``check``. The median wall time of each is printed with its ratio to ``python -c pass``. The
target is a ratio of at most 5 plus the command's own database work: a command imports only
what it needs (no chat SDK, no web server, not the whole engine, no Alembic but to migrate).
Figures are printed, never asserted; ``python -X importtime -m bot.cli token list`` shows where
the time goes.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 5
DRIVER_IMPORT = "import sqlalchemy.ext.asyncio, aiosqlite"  # what any database work imports


def wall_time(command: list[str], env: dict[str, str] | None = None) -> float:
    """Seconds from start to exit of one ``command`` (its output is thrown away)."""
    started = time.perf_counter()
    subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - started


def median_time(command: Callable[[], list[str]], runs: int, env: dict[str, str] | None) -> float:
    """The median of ``runs`` runs of ``command()`` (called afresh for each run: a token name
    can be created or revoked once), after one run that warms the caches."""
    wall_time(command(), env)
    return statistics.median(wall_time(command(), env) for _ in range(runs))


def signoff(*args: str) -> list[str]:
    return [sys.executable, "-m", "bot.cli", *args]


def commands(config: str, runs: int, env: dict[str, str]) -> dict[str, Callable[[], list[str]]]:
    """The commands timed, each a function giving the next run's argv; the tokens that
    ``token revoke`` revokes are created here first."""
    made = itertools.count()
    for n in range(runs + 1):  # one for each run of token revoke, and its warm-up
        create = ("token", "create", "--role", "agent", "--name", f"revoke-{n}")
        subprocess.run(
            signoff(*create, "--config", config), env=env, check=True, stdout=subprocess.DEVNULL
        )
    revoked = itertools.count()
    return {
        "signoff --help": lambda: signoff("--help"),
        "token create": lambda: signoff(
            "token", "create", "--role", "agent", "--name", f"t-{next(made)}", "--config", config
        ),
        "token list": lambda: signoff("token", "list", "--config", config),
        "token revoke": lambda: signoff(
            "token", "revoke", f"revoke-{next(revoked)}", "--config", config
        ),
        "login-link": lambda: signoff("login-link", "--config", config),
        "migrate": lambda: signoff("migrate", "--config", config),
        "check": lambda: signoff("check", "--config", config),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command (default 7)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    with tempfile.TemporaryDirectory(prefix="signoff-bench-") as folder:
        config = Path(folder) / "app.yaml"
        config.write_text(
            f"database: {{url: 'sqlite+aiosqlite:///{folder}/bench.db'}}\n"
            "people: {alice: {email: alice@example.com}}\nadmins: [alice]\n"
        )
        subprocess.run(signoff("migrate", "--config", str(config)), env=env, check=True)
        bare = median_time(lambda: [sys.executable, "-c", "pass"], args.runs, env)
        print(f"median of {args.runs} runs; ratio to python -c pass (target: at most")
        print(f"{TARGET_RATIO} x plus the command's own database work)")
        print(f"{'python -c pass':<16} {bare * 1000:8.0f} ms")
        # The floor of any command that opens the database: importing its driver stack.
        driver = median_time(lambda: [sys.executable, "-c", DRIVER_IMPORT], args.runs, env)
        print(f"{'database driver':<16} {driver * 1000:8.0f} ms {driver / bare:6.1f} x")
        for name, command in commands(str(config), args.runs, env).items():
            took = median_time(command, args.runs, env)
            print(f"{name:<16} {took * 1000:8.0f} ms {took / bare:6.1f} x")


if __name__ == "__main__":
    main()
