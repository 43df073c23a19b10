"""``signoff login-link``: a fresh one-time console sign-in link for an admin, on SQLite or
PostgreSQL; and the link ``signoff serve`` prints at start (SQLite only: a local install).

The link is ``{server.publicUrl}/console/login?once=<token>``, the value of the ``local-admin``
token: one link is valid at a time, and a newer one replaces it (``bot.console.login`` says so
to whoever opens the old one). The public URL is the configuration's (``server.publicUrl``, or
``server.host`` and ``server.port``); when nothing answers there, the link is still printed, with
one line on stderr saying so.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING, Any

from bot.cli.checks import EXIT_CONFIG, add_config, load, person_problem, require_migrated

if TYPE_CHECKING:
    from engine.config import AppConfig

log = logging.getLogger(__name__)
PROBE_SECONDS = 0.3  # how long login-link waits to learn whether a server answers


def add_parser(sub: Any) -> None:
    login = sub.add_parser("login-link", help="print a fresh one-time sign-in link for an admin")
    add_config(login)
    login.add_argument(
        "--person", help="the admin the link signs in (default: the first of admins:)"
    )
    login.set_defaults(func=cmd_login_link)


def cmd_login_link(args: argparse.Namespace) -> int:
    """Print a fresh one-time sign-in link for an admin, as ``signoff serve`` does at start
    (the link printed before stops working: one link is valid at a time)."""
    from engine.domain.approvers import admin_token_problem

    config = load(args.config)
    person = args.person
    if person is None:
        if not config.admins:
            print(
                f"error: {config.source} has no admins: (a sign-in link signs in an admin); "
                "no link made",
                file=sys.stderr,
            )
            return EXIT_CONFIG
        person = config.admins[0]
    problem = person_problem(config, person, "a sign-in link signs in one admin of admins:")
    if problem is None:
        problem = admin_token_problem(config, person)
    if problem is not None:
        print(f"error: {problem}; no link made", file=sys.stderr)
        return EXIT_CONFIG
    require_migrated(config)
    import asyncio

    from engine.domain.errors import SignoffError

    try:
        link = asyncio.run(sign_in_link(config, person))
    except SignoffError as exc:
        print(f"error: could not store a sign-in link: {exc.message}", file=sys.stderr)
        return 1
    print(f"sign in to the console as {person} (this link works once): {link}")
    if not answers(config.server.public_url, PROBE_SECONDS):
        then = (
            " (at start it prints a link of its own, which replaces this one)"
            if config.database.is_sqlite
            else ""
        )
        print(
            f"note: no server answers at {config.server.public_url} now: start it with "
            f"`signoff serve`{then}",
            file=sys.stderr,
        )
    return 0


async def sign_in_link(config: AppConfig, person: str) -> str:
    """Give ``person`` (an admin) a fresh ``local-admin`` token and return its one-time link;
    the link given before stops working."""
    from urllib.parse import urlencode

    from bot.tokens import LOCAL_ADMIN, hash_token, new_token
    from engine.domain.model import Role
    from engine.standalone import SystemClock, open_tokens

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


def answers(url: str, seconds: float) -> bool:
    """Whether something accepts a TCP connection at the host and port of ``url`` within
    ``seconds`` (what a browser opening the link would reach first)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname or "localhost", port), timeout=seconds):
            return True
    except (OSError, ValueError):
        return False
