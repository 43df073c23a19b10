"""``signoff token create|list|revoke``: API tokens, on the database directly (no server)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from bot.cli.checks import EXIT_CONFIG, add_config, load, person_problem, require_migrated
from engine.domain.errors import Conflict, SignoffError
from engine.domain.model import Role

if TYPE_CHECKING:
    from engine.config import AppConfig
    from engine.domain.model import ApiToken


def add_parser(sub: Any) -> None:
    token = sub.add_parser("token", help="create, list and revoke API tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = token_sub.add_parser("create", help="create a token (printed once, stored hashed)")
    add_config(create)
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument("--name", required=True, help="a unique name for the token")
    create.add_argument(
        "--person", help="tie the token to someone in people: (an admin token: in admins:)"
    )
    listing = token_sub.add_parser("list", help="list tokens (never their values)")
    add_config(listing)
    revoke = token_sub.add_parser("revoke", help="revoke a token by name")
    add_config(revoke)
    revoke.add_argument("name")
    token.set_defaults(func=cmd_token)


def cmd_token(args: argparse.Namespace) -> int:
    config = load(args.config)
    require_migrated(config)
    import asyncio  # not at the top: it alone doubled the time of signoff --help

    return asyncio.run(_token(config, args))


async def _token(config: AppConfig, args: argparse.Namespace) -> int:
    from bot.tokens import hash_token, new_token
    from engine.domain.approvers import admin_token_problem
    from engine.standalone import SystemClock, open_tokens

    async with open_tokens(config.database.url) as tokens:
        try:
            if args.token_command == "create":
                belongs = "a token belongs to one person of people:"
                if (problem := person_problem(config, args.person, belongs)) is not None:
                    print(f"error: {problem}; no token created", file=sys.stderr)
                    return EXIT_CONFIG
                if args.role == Role.ADMIN.value:  # the one rule: engine.domain.approvers
                    if (problem := admin_token_problem(config, args.person)) is not None:
                        print(f"error: {problem}; no token created", file=sys.stderr)
                        return EXIT_CONFIG
                token = new_token()
                try:
                    await tokens.create(
                        args.name,
                        Role(args.role),
                        args.person,
                        hash_token(token),
                        SystemClock().now(),
                    )
                except Conflict:  # a refusal like the others: exit 2, and say what to do
                    print(
                        f"error: a token named {args.name!r} already exists (revoked ones keep "
                        "their names); choose another --name; no token created",
                        file=sys.stderr,
                    )
                    return EXIT_CONFIG
                print(
                    f"created {args.role} token {args.name!r}"
                    + (f" for {args.person}" if args.person else "")
                )
                print("store it now; it is not shown again:")
                print(token)
            elif args.token_command == "list":
                for tok in await tokens.all():
                    state = f"revoked {tok.revoked_at:%Y-%m-%d}" if tok.revoked_at else "active"
                    print(f"{tok.name}\t{tok.role.value}\t{tok.person or '-'}\t{state}")
            elif args.token_command == "revoke":
                if (problem := _revoke_problem(await tokens.all(), args.name)) is not None:
                    print(f"error: {problem}; nothing revoked", file=sys.stderr)
                    return EXIT_CONFIG
                await tokens.revoke(args.name, SystemClock().now())
                print(f"revoked {args.name!r}")
            return 0
        except SignoffError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            return 1


def _revoke_problem(known: list[ApiToken], name: str) -> str | None:
    """Why the token ``name`` cannot be revoked (None when it is active): a refusal, exit 2."""
    token = next((tok for tok in known if tok.name == name), None)
    if token is None:
        names = ", ".join(tok.name for tok in known) or "none yet"
        return f"there is no token named {name!r} (tokens: {names}; `signoff token list`)"
    if token.revoked_at is not None:
        return f"the token {name!r} was already revoked on {token.revoked_at:%Y-%m-%d}"
    return None
