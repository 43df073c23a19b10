"""``signoff login-link``: a fresh one-time console sign-in link for the local admin."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot.cli.checks import EXIT_CONFIG, add_config, load, require_migrated


def add_parser(sub: Any) -> None:
    login = sub.add_parser(
        "login-link", help="print a fresh one-time sign-in link for the local admin"
    )
    add_config(login)
    login.set_defaults(func=cmd_login_link)


def cmd_login_link(args: argparse.Namespace) -> int:
    """Print a fresh one-time sign-in link for the local admin, as ``signoff serve`` does at
    start (the link printed before stops working: one link is valid at a time)."""
    from bot.console.login import local_admin_link

    config = load(args.config)
    if not config.database.is_sqlite:
        print(
            "error: one-time sign-in links are for a local install on SQLite; sign in with an "
            "API token (signoff token create --role admin --name NAME --person PERSON)",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if not config.admins:
        print(
            f"error: {config.source} has no admins: (the link signs in as the first)",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    require_migrated(config)
    link = local_admin_link(config)
    if link is None:
        print("error: could not store a sign-in link (see the log above)", file=sys.stderr)
        return 1
    print(f"sign in to the console as {config.admins[0]} (this link works once): {link}")
    return 0
