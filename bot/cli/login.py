"""``signoff login-link``: a fresh one-time console sign-in link for the local admin; and the
link ``signoff serve`` prints at start (SQLite only: a local install).

The link is ``{server.publicUrl}/console/login?once=<token>``, the value of the ``local-admin``
token: one link is valid at a time, and a newer one replaces it (``bot.console.login`` says so
to whoever opens the old one).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

from bot.cli.checks import EXIT_CONFIG, add_config, load, require_migrated

if TYPE_CHECKING:
    from engine.config import AppConfig

log = logging.getLogger(__name__)


def add_parser(sub: Any) -> None:
    login = sub.add_parser(
        "login-link", help="print a fresh one-time sign-in link for the local admin"
    )
    add_config(login)
    login.set_defaults(func=cmd_login_link)


def cmd_login_link(args: argparse.Namespace) -> int:
    """Print a fresh one-time sign-in link for the local admin, as ``signoff serve`` does at
    start (the link printed before stops working: one link is valid at a time)."""
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


async def sign_in_link(config: AppConfig, person: str) -> str:
    """Give ``person`` (an admin) a fresh ``local-admin`` token and return its one-time link;
    the link given before stops working."""
    from urllib.parse import urlencode

    from bot.tokens import LOCAL_ADMIN, hash_token, new_token
    from engine.assembly import SystemClock, open_tokens
    from engine.domain.model import Role

    token = new_token()
    async with open_tokens(config.database.url) as tokens:
        await tokens.put(LOCAL_ADMIN, Role.ADMIN, person, hash_token(token), SystemClock().now())
    return f"{config.server.public_url}/console/login?{urlencode({'once': token})}"


def local_admin_link(config: AppConfig) -> str | None:
    """``signoff serve``'s link at start: the first admin's, on SQLite only (a local install; a
    shared deployment hands out links with ``signoff login-link``, or tokens with ``signoff
    token``). None, with a warning logged, when it cannot be stored. Call before the server's
    event loop starts."""
    import asyncio

    from engine.domain.errors import SignoffError

    if not config.database.is_sqlite or not config.admins:
        return None
    try:
        return asyncio.run(sign_in_link(config, config.admins[0]))
    except SignoffError as exc:
        log.warning("no console sign-in link (is the database migrated?): %s", exc.message)
        return None
