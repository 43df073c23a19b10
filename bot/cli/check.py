"""``signoff check``: validate the configuration, look at the database without changing it,
say which credentials are set."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from bot.cli.checks import EXIT_CONFIG, add_config, database_state, load

if TYPE_CHECKING:
    from engine.config import AppConfig


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
    print(f"slack: {_slack_state(config)}")
    print(f"teams: {_teams_state(config)}")
    print(f"llm: {'set' if config.llm.enabled else 'unset'}")
    # Look at the database without changing it: a missing SQLite file is not created.
    import asyncio

    problem, state = asyncio.run(database_state(config))
    if problem is None:
        print(f"database: ok ({state})")
        return 0
    print(f"database: {problem}")
    return EXIT_CONFIG if problem.startswith("database not migrated") else 1


def _slack_state(config: AppConfig) -> str:
    token, secret = config.slack.bot_token, config.slack.signing_secret
    if not token and not secret:
        return "unset"
    problems = []
    if not token.startswith("xoxb-"):
        problems.append("botToken does not look like a bot token (xoxb-...)")
    if len(secret) < 16:
        problems.append("signingSecret is too short")
    return "invalid: " + "; ".join(problems) if problems else "set"


def _teams_state(config: AppConfig) -> str:
    if not config.teams.app_id:
        if config.teams.insecure_local_dev:
            return "unset, insecureLocalDev ON: unsigned requests accepted (local testing only)"
        return "unset (/api/messages not mounted)"
    if not config.teams.app_password:
        return "invalid: appId set without appPassword"
    return "set"
