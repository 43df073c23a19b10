"""Signing in to the console with an API token, and the local admin's one-time link.

``signoff serve`` on SQLite (a local install) gives the first admin a token named
``local-admin`` at every start and prints ``{publicUrl}/console/login?once=<token>``. Opening it
shows a one-button form (a link previewer's GET spends nothing); submitting it signs in and
replaces the token's value with one nobody knows, so the link works once. Sessions made with it
stay valid: they name the token, which stays active.
"""

from __future__ import annotations

import asyncio
import logging
import re
from urllib.parse import urlencode, urlsplit

from aiohttp import web

from bot.console.context import page_context
from bot.console.pages import page, redirect, render
from bot.console.security import CONSOLE_ROLES, CSRF_FIELD
from bot.tokens import hash_token, new_token
from engine.config import AppConfig
from engine.domain.errors import InvalidRequest, SignoffError
from engine.domain.model import ApiToken, Role

log = logging.getLogger(__name__)

routes = web.RouteTableDef()
LOCAL_ADMIN = "local-admin"
HOME = "/console"
# Browsers drop tabs and newlines from a Location ("/\t/evil.example" is "//evil.example", another
# host), and a CR or LF cannot be sent in a header at all: either is refused (400).
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def safe_next(raw: object) -> str:
    """Where to go after signing in: a path on this server, never another site. Anything else
    (another host, ``//``, a backslash, a scheme) goes home; a control character is a 400."""
    if not isinstance(raw, str):
        return HOME
    if _CONTROL.search(raw):
        raise InvalidRequest("next: the page to return to holds a control character")
    if not raw.startswith("/") or raw.startswith("//") or "\\" in raw:
        return HOME
    parts = urlsplit(raw)
    return HOME if parts.scheme or parts.netloc else raw


@routes.get("/console/login")
@page
async def login_page(request: web.Request) -> web.StreamResponse:
    ctx = page_context(request)
    target = safe_next(request.query.get("next"))
    once = request.query.get("once")
    if once is None and await ctx.sessions.principal(request) is not None:
        return redirect(target)
    return await render(request, "login.html.j2", next=target, once=once, problem=None)


@routes.post("/console/login")
@page
async def login(request: web.Request) -> web.StreamResponse:
    ctx = page_context(request)
    tokens = ctx.engine.tokens
    form = await request.post()
    ctx.sessions.check_csrf(request, form.get(CSRF_FIELD))
    target = safe_next(form.get("next"))
    once = str(form.get("once") or "")
    token: ApiToken | None
    if once:
        token = await tokens.rotate(LOCAL_ADMIN, hash_token(once), hash_token(new_token()))
        if token is None:
            return await _refused(request, target, 410, "This sign-in link was already used.")
    else:
        secret = str(form.get("token") or "").strip()
        token = await tokens.by_hash(hash_token(secret)) if secret else None
        if token is None:
            return await _refused(request, target, 401, "That token is not valid or revoked.")
    if token.role not in CONSOLE_ROLES:
        return await _refused(request, target, 403, "Agent tokens cannot sign in to the console.")
    response = redirect(target)
    ctx.sessions.start(response, token)
    return response


async def _refused(request: web.Request, target: str, status: int, problem: str) -> web.Response:
    return await render(
        request, "login.html.j2", status=status, next=target, once=None, problem=problem
    )


@routes.post("/console/logout")
@page
async def logout(request: web.Request) -> web.StreamResponse:
    ctx = page_context(request)
    form = await request.post()
    ctx.sessions.check_csrf(request, form.get(CSRF_FIELD))
    response = redirect("/console/login")
    ctx.sessions.end(response)
    return response


def login_url(next_path: str) -> str:
    return f"/console/login?{urlencode({'next': next_path})}"


# -- the local admin's one-time link (``signoff serve``) -----------------------------------------


async def _local_admin_link(config: AppConfig) -> str | None:
    from engine.assembly import SystemClock, open_tokens

    if not config.database.is_sqlite or not config.admins:
        return None
    token = new_token()
    try:
        async with open_tokens(config.database.url) as tokens:
            await tokens.put(
                LOCAL_ADMIN, Role.ADMIN, config.admins[0], hash_token(token), SystemClock().now()
            )
    except SignoffError as exc:
        log.warning("no console sign-in link (is the database migrated?): %s", exc.message)
        return None
    return f"{config.server.public_url}/console/login?{urlencode({'once': token})}"


def local_admin_link(config: AppConfig) -> str | None:
    """Give the first admin a fresh ``local-admin`` token and return its one-time sign-in link
    (SQLite only: a local install; a shared deployment hands out tokens with ``signoff token``).
    Call before the server's event loop starts."""
    return asyncio.run(_local_admin_link(config))
