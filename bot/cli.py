"""The ``signoff`` command: serve, migrate, check, token, login-link, cards, teams, demo.

Configuration errors exit with status 2 and one line per problem, each naming its YAML path
(``bot.cli_checks``, shared by every command). This is the top of the program: it alone reads
``os.environ`` and hands it to the loader.

``signoff --help`` must stay quick: this module imports only what building the parser needs.
Each command imports its own dependencies (the web server, the chat SDKs, the store) when it
runs, and the parsers of ``cards``, ``teams`` and ``demo`` are built from their modules only
when that command is the one given (``_PLUGGED``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.cli_checks import EXIT_CONFIG, database_state, load, require_migrated
from engine.domain.errors import SignoffError
from engine.domain.model import Role

if TYPE_CHECKING:
    import socket

    from engine.assembly import EngineOptions
    from engine.config import AppConfig

DEFAULT_CONFIG = "app.yaml"


def _load(path: str) -> AppConfig:
    return load(path)


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        default=os.environ.get("SIGNOFF_CONFIG", DEFAULT_CONFIG),
        help="path of app.yaml (default: $SIGNOFF_CONFIG or ./app.yaml)",
    )


# -- commands ------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    config = _load(args.config)
    host = args.host or config.server.host
    port = args.port or config.server.port
    # Listen first: "serving" and the sign-in link are printed only once the port is ours.
    sock = _listen(host, port)

    from aiohttp import web

    from bot.app import create_app
    from bot.web.login import local_admin_link

    app = create_app(config, _engine_options())
    print(
        f"signoff serving on http://{host}:{port} (public URL {config.server.public_url})",
        flush=True,
    )
    if (login := local_admin_link(config)) is not None:
        print(f"sign in to the console (this link works once): {login}", flush=True)
    # run_app handles SIGINT/SIGTERM: it stops accepting, lets in-flight requests finish
    # (shutdown_timeout), then runs the cleanup that stops workers at a commit point.
    web.run_app(app, sock=sock, print=None, shutdown_timeout=15.0, access_log=None)
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or exit 2 with one line saying what to change."""
    import errno
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        print(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    try:
        # As asyncio's servers do: a restart may reuse a port whose old connections linger.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            why = "is already in use (another signoff serve?)"
        else:
            why = f"cannot be listened on ({exc.strerror or exc})"
        print(
            f"error: port {port} on {host} {why}: set SIGNOFF_PORT (or server.port in "
            "app.yaml, or --port) to a free port",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_CONFIG) from None
    sock.setblocking(False)
    return sock


def _engine_options() -> EngineOptions | None:
    """``SIGNOFF_CLOCK_SKEW_SECONDS`` runs this process with a wrong local clock (fault-injection
    tests: a replica ten minutes off must decide expiry like the others)."""
    skew = os.environ.get("SIGNOFF_CLOCK_SKEW_SECONDS")
    if not skew:
        return None
    from datetime import timedelta

    from engine.assembly import EngineOptions
    from engine.ports import SystemClock

    return EngineOptions(clock=SystemClock(timedelta(seconds=float(skew))), sync_clock=True)


def cmd_migrate(args: argparse.Namespace) -> int:
    import asyncio

    from engine.adapters.store.migrate import head_revision, upgrade_to_head

    config = _load(args.config)
    try:
        asyncio.run(upgrade_to_head(config.database.url))
    except Exception as exc:
        print(f"migration failed: {exc}", file=sys.stderr)
        return 1
    print(f"database at revision {head_revision()}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    config = _load(args.config)  # a bad file, a malformed rule included, exits 2 here
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


def cmd_token(args: argparse.Namespace) -> int:
    config = _load(args.config)
    require_migrated(config)
    import asyncio  # not at the top: it alone doubled the time of signoff --help

    return asyncio.run(_token(config, args))


async def _token(config: AppConfig, args: argparse.Namespace) -> int:
    from bot.tokens import hash_token, new_token
    from engine.adapters.store import Database, SqlStore
    from engine.domain.approvers import admin_token_problem
    from engine.ports import SystemClock

    db = Database(config.database.url)
    store = SqlStore(db)
    try:
        if args.token_command == "create":
            if args.person is not None and args.person not in config.people:
                print(f"error: --person {args.person!r} is not in people:", file=sys.stderr)
                return EXIT_CONFIG
            if args.role == Role.ADMIN.value:  # the one rule: engine.approvers
                if (problem := admin_token_problem(config, args.person)) is not None:
                    print(f"error: {problem}; no token created", file=sys.stderr)
                    return EXIT_CONFIG
            token = new_token()
            await store.create_token(
                args.name, Role(args.role), args.person, hash_token(token), SystemClock().now()
            )
            print(
                f"created {args.role} token {args.name!r}"
                + (f" for {args.person}" if args.person else "")
            )
            print("store it now; it is not shown again:")
            print(token)
        elif args.token_command == "list":
            for tok in await store.list_tokens():
                state = f"revoked {tok.revoked_at:%Y-%m-%d}" if tok.revoked_at else "active"
                print(f"{tok.name}\t{tok.role.value}\t{tok.person or '-'}\t{state}")
        elif args.token_command == "revoke":
            await store.revoke_token(args.name, SystemClock().now())
            print(f"revoked {args.name!r}")
        return 0
    except SignoffError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    finally:
        await db.dispose()


def cmd_login_link(args: argparse.Namespace) -> int:
    """Print a fresh one-time sign-in link for the local admin, as ``signoff serve`` does at
    start (the link printed before stops working: one link is valid at a time)."""
    from bot.web.login import local_admin_link

    config = _load(args.config)
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


# -- the parser ----------------------------------------------------------------------------------


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser for the command ``argv`` (default ``sys.argv[1:]``) names."""
    parser = argparse.ArgumentParser(
        prog="signoff", description="Human approval for AI agents and workflows."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the HTTP service with its workers")
    _add_config(serve)
    serve.add_argument("--host", help="listen address (default server.host)")
    serve.add_argument("--port", type=int, help="listen port (default server.port)")
    serve.set_defaults(func=cmd_serve)

    migrate = sub.add_parser("migrate", help="upgrade the database to the newest schema")
    _add_config(migrate)
    migrate.set_defaults(func=cmd_migrate)

    check = sub.add_parser(
        "check", help="validate the configuration, reach the database, report credentials"
    )
    _add_config(check)
    check.set_defaults(func=cmd_check)

    token = sub.add_parser("token", help="create, list and revoke API tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = token_sub.add_parser("create", help="create a token (printed once, stored hashed)")
    _add_config(create)
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument("--name", required=True, help="a unique name for the token")
    create.add_argument(
        "--person", help="tie the token to someone in people: (an admin token: in admins:)"
    )
    listing = token_sub.add_parser("list", help="list tokens (never their values)")
    _add_config(listing)
    revoke = token_sub.add_parser("revoke", help="revoke a token by name")
    _add_config(revoke)
    revoke.add_argument("name")
    token.set_defaults(func=cmd_token)

    login = sub.add_parser(
        "login-link", help="print a fresh one-time sign-in link for the local admin"
    )
    _add_config(login)
    login.set_defaults(func=cmd_login_link)

    chosen = next((a for a in (sys.argv[1:] if argv is None else argv) if a[:1] != "-"), None)
    for name, (summary, module, register) in _PLUGGED.items():
        if name == chosen:
            getattr(importlib.import_module(module), register)(sub)
        else:
            sub.add_parser(name, help=summary)  # only listed: its own parser is not needed
    return parser


# Commands whose modules import a lot (jinja2, botbuilder, the web app): their parsers are built
# from their modules only when they are the command given. name -> (help, module, function).
_PLUGGED = {
    "cards": ("approval cards", "cards.cli", "add_cards_parser"),
    "teams": ("Microsoft Teams", "bot.teams.package", "add_teams_parser"),
    "demo": (
        "start a run of the refund-demo workflow and print its approval link",
        "bot.web.demo",
        "add_demo_parser",
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=os.environ.get("SIGNOFF_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Alembic logs one line per plugin it sets up at import, on every command that migrates.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    args = build_parser(argv).parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
