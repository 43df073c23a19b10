"""The ``signoff`` command: init, serve, reload, migrate, check, token, login-link, cards, the
channels' commands, demo, one module of this package per command (``cards``: ``cards.cli``; a
channel's: its package, as ``bot.channels.COMMANDS`` lists them).

Configuration errors exit with status 2 and one line per problem, each naming its YAML path
(``bot.cli.checks``, shared by every command). This is the top of the program: it alone reads
``os.environ`` and hands it to the loader.

``signoff --help`` must stay quick: the command modules import only what building their parser
needs, and each command imports its own dependencies (the web server, the chat SDKs, the
engine) when it runs. The parser of ``cards`` (jinja2) is built from its module only when it is
the command given (``_PLUGGED``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from bot.channels import COMMANDS as CHANNEL_COMMANDS
from bot.cli import check, demo, init, login, migrate, reload, serve, tokens

# The commands in the order ``signoff --help`` lists them.
_COMMANDS = (init, serve, reload, migrate, check, tokens, login)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser for the command ``argv`` (default ``sys.argv[1:]``) names."""
    parser = argparse.ArgumentParser(
        prog="signoff", description="Human approval for AI agents and workflows."
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print the version of Signoff and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.add_parser(sub)
    chosen = next((a for a in (sys.argv[1:] if argv is None else argv) if a[:1] != "-"), None)
    for name, (summary, module, register) in {**_PLUGGED, **CHANNEL_COMMANDS}.items():
        if name == chosen:
            getattr(importlib.import_module(module), register)(sub)
        else:
            sub.add_parser(name, help=summary)  # only listed: its own parser is not needed
    demo.add_parser(sub)
    return parser


class _Version(argparse.Action):
    """``--version``: ``signoff <version>`` of the installed package, looked up only when asked
    for (argparse's own version action wants the string while the parser is built)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"signoff {version('signoff')}")
        except PackageNotFoundError:
            print("signoff (version unknown: not installed; run `pip install -e .`)")
        parser.exit()


# Commands whose modules import a lot (jinja2): their parsers are built from their modules only
# when they are the command given. name -> (help, module, function). The channels' commands
# (``bot.channels.COMMANDS``) are plugged the same way, after these.
_PLUGGED = {"cards": ("approval cards", "cards.cli", "add_cards_parser")}


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=os.environ.get("SIGNOFF_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Alembic logs at INFO whenever a command reads or upgrades the schema (the plugins it sets
    # up, "Context impl SQLiteImpl.", each revision applied): noise on every command, and on
    # every /readyz of the server. The commands say what they did themselves; its warnings and
    # errors still show, and SIGNOFF_LOG_LEVEL=DEBUG shows everything.
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("alembic").setLevel(logging.WARNING)
    args = build_parser(argv).parse_args(argv)
    result: int = args.func(args)
    return result
