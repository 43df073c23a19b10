"""``signoff check``: validate the configuration, look at the database without changing it,
say which credentials are set."""

from __future__ import annotations

import argparse
from typing import Any

from bot.cli.checks import EXIT_CONFIG, add_config, database_state, load


def add_parser(sub: Any) -> None:
    check = sub.add_parser(
        "check", help="validate the configuration, reach the database, report credentials"
    )
    add_config(check)
    check.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    config = load(args.config)  # a bad file, a malformed rule included, exits 2 here
    print(f"config {args.config}: ok")
    for warning in config.warnings:
        print(f"warning: {warning}")
    from engine.config.channels import channel_states  # not at the top: see bot.cli

    for name, credentials in channel_states(config.channel_sections.__getitem__):
        print(f"{name}: {credentials}")
    print(f"llm: {'set' if config.llm.enabled else 'unset'}")
    # Look at the database without changing it: a missing SQLite file is not created.
    import asyncio

    problem, state = asyncio.run(database_state(config))
    if problem is None:
        print(f"database: ok ({state})")
        return 0
    print(f"database: {problem}")
    return EXIT_CONFIG if problem.startswith("database not migrated") else 1
