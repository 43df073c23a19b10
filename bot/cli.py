"""The ``signoff`` command: serve, migrate, check, token, cards.

Configuration errors exit with status 2 and one line per problem, each naming its YAML path.
This is the top of the program: it alone reads ``os.environ`` and hands it to the loader.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from bot.teams.package import add_teams_parser
from bot.web.demo import add_demo_parser
from cards.cli import add_cards_parser
from engine.config import AppConfig, load_config
from engine.errors import ConfigError, SignoffError
from engine.model import Role
from engine.runtime import EngineOptions

EXIT_CONFIG = 2
DEFAULT_CONFIG = "app.yaml"


def _load(path: str) -> AppConfig:
    try:
        return load_config(path, os.environ)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"config error: {problem}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        default=os.environ.get("SIGNOFF_CONFIG", DEFAULT_CONFIG),
        help="path of app.yaml (default: $SIGNOFF_CONFIG or ./app.yaml)",
    )


# -- commands ------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    from aiohttp import web

    from bot.app import create_app
    from bot.web.login import local_admin_link

    config = _load(args.config)
    host = args.host or config.server.host
    port = args.port or config.server.port
    app = create_app(config, _engine_options())
    print(
        f"signoff serving on http://{host}:{port} (public URL {config.server.public_url})",
        flush=True,
    )
    if (login := local_admin_link(config)) is not None:
        print(f"sign in to the console (this link works once): {login}", flush=True)
    # run_app handles SIGINT/SIGTERM: it stops accepting, lets in-flight requests finish
    # (shutdown_timeout), then runs the cleanup that stops workers at a commit point.
    web.run_app(app, host=host, port=port, print=None, shutdown_timeout=15.0, access_log=None)
    return 0


def _engine_options() -> EngineOptions | None:
    """``SIGNOFF_CLOCK_SKEW_SECONDS`` runs this process with a wrong local clock (fault-injection
    tests: a replica ten minutes off must decide expiry like the others)."""
    skew = os.environ.get("SIGNOFF_CLOCK_SKEW_SECONDS")
    if not skew:
        return None
    from datetime import timedelta

    from engine.ports import SystemClock

    return EngineOptions(clock=SystemClock(timedelta(seconds=float(skew))), sync_clock=True)


def cmd_migrate(args: argparse.Namespace) -> int:
    from engine.store.migrate import head_revision, upgrade_to_head

    config = _load(args.config)
    try:
        asyncio.run(upgrade_to_head(config.database.url))
    except Exception as exc:
        print(f"migration failed: {exc}", file=sys.stderr)
        return 1
    print(f"database at revision {head_revision()}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    config = _load(args.config)
    status = 0
    print(f"config {args.config}: ok")
    for warning in config.warnings:
        print(f"warning: {warning}")
    for problem in config.rule_problems:
        print(f"policy error (fails closed at run time): {problem}")
        status = EXIT_CONFIG
    print(f"slack: {_slack_state(config)}")
    print(f"teams: {_teams_state(config)}")
    print(f"llm: {'set' if config.llm.enabled else 'unset'}")
    status = max(status, asyncio.run(_check_database(config)))
    return status


async def _check_database(config: AppConfig) -> int:
    """Reach the database and report its migration state. Unreachable is an error; a schema
    behind the code is reported (``signoff migrate`` fixes it, and ``make run`` runs it)."""
    from sqlalchemy.engine import make_url

    from engine.store import Database, SqlStore
    from engine.store.migrate import head_revision

    url = make_url(config.database.url)
    if url.drivername.startswith("sqlite") and url.database and url.database != ":memory:":
        if not os.path.exists(url.database):
            print(f"database: {url.database} does not exist yet (signoff migrate creates it)")
            return 0
    db = Database(config.database.url)
    try:
        revision = await asyncio.wait_for(SqlStore(db).schema_revision(), 10)
    except Exception as exc:
        print(f"database: unreachable ({type(exc).__name__}: {exc})")
        return 1
    finally:
        await db.dispose()
    head = head_revision()
    if revision != head:
        print(
            f"database: reachable ({db.dialect}), at revision {revision}, code expects {head}: "
            "run signoff migrate"
        )
        return 0
    print(f"database: ok ({db.dialect}, revision {revision})")
    return 0


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
    return asyncio.run(_token(config, args))


async def _token(config: AppConfig, args: argparse.Namespace) -> int:
    from bot.tokens import hash_token, new_token
    from engine.approvers import admin_token_problem
    from engine.ports import SystemClock
    from engine.store import Database, SqlStore

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


# -- the parser ----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
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

    add_cards_parser(sub)
    add_teams_parser(sub)
    add_demo_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=os.environ.get("SIGNOFF_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
