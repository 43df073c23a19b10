"""``signoff teams package``: the Teams app package to side-load (``bot.teams.package``, imported
only when the command runs). ``bot.cli`` builds this parser only when ``teams`` is the command
given (``bot.channels.COMMANDS``), so ``signoff --help`` never imports this package."""

from __future__ import annotations

import argparse
import os
from typing import Any


def add_parser(subparsers: Any) -> None:
    """Register ``teams package`` on an ``argparse`` subparsers object."""
    teams: argparse.ArgumentParser = subparsers.add_parser("teams", help="Microsoft Teams")
    commands = teams.add_subparsers(dest="teams_command", required=True)
    package = commands.add_parser(
        "package",
        help="write the Teams app package (manifest and icons) to side-load",
        description="Write signoff-teams.zip: manifest.json (v1.17) with the bot and its "
        "command list, and the two icons. See docs/teams.md for side-loading.",
    )
    package.add_argument(
        "--config",
        default=os.environ.get("SIGNOFF_CONFIG", "app.yaml"),
        help="app.yaml, for teams.appId and server.publicUrl (default: $SIGNOFF_CONFIG)",
    )
    package.add_argument("--output", default="signoff-teams.zip", help="the zip to write")
    package.add_argument("--app-id", help="the bot's Microsoft App ID (default: teams.appId)")
    package.add_argument(
        "--website-url",
        help="https page for the developer links (default: server.publicUrl if https)",
    )
    package.add_argument("--name", default="Signoff", help="the app's short name")
    package.set_defaults(func=cmd_teams_package)


def cmd_teams_package(args: argparse.Namespace) -> int:
    from bot.cli.checks import require_config_file
    from bot.teams.package import teams_package

    require_config_file(args.config)

    return teams_package(args)
