"""Signing in to the console with an API token, and the local admin's one-time link.

``signoff serve`` on SQLite (a local install) gives the first admin a token named
``local-admin`` at every start and prints ``{publicUrl}/console/login?once=<token>``;
``signoff login-link`` prints a fresh one on demand (any admin, SQLite or PostgreSQL). Opening
it shows a one-button form (a link previewer's GET spends nothing); submitting it signs in and
marks the value spent (``engine.services.sign_in_links``), so the link works once. A link that
no longer works (used, replaced by a newer one) answers 410 without the button, saying why and
how to get a new one. Sessions made with it stay valid: they name the token, which stays active.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode, urlsplit

from aiohttp import web

from bot.console.context import page_context
from bot.console.pages import page, redirect, render
from bot.console.security import CONSOLE_ROLES, CSRF_FIELD
from bot.tokens import LOCAL_ADMIN, hash_token
from engine.domain.errors import InvalidRequest
from engine.domain.model import ApiToken
from engine.services.sign_in_links import SignInRefusal, once_refusal, spend_once
from engine.services.tokens import Tokens

routes = web.RouteTableDef()
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
    if once is not None:  # a link that no longer works does not offer to sign in
        if (gone := await _once_gone(ctx.engine.tokens, once)) is not None:
            return await _refused(request, target, 410, *gone)
        token = await ctx.engine.tokens.by_hash(hash_token(once))
        admin = token.person if token is not None else None
        return await render(
            request, "login.html.j2", next=target, once=once, admin=admin, problem=None, renew=None
        )
    return await render(request, "login.html.j2", next=target, once=None, problem=None, renew=None)


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
        token = await spend_once(tokens, LOCAL_ADMIN, hash_token(once))
        if token is None:
            gone = await _once_gone(tokens, once)
            if gone is None:  # it was spent between the two reads: by someone else
                gone = _GONE[SignInRefusal.USED], _renew("NAME")
            return await _refused(request, target, 410, *gone)
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


_GONE = {
    SignInRefusal.USED: "This sign-in link was already used: it works once.",
    SignInRefusal.REPLACED: "This sign-in link was replaced by a newer link: only the newest "
    "one works.",
    SignInRefusal.INACTIVE: "This sign-in link does not work: no sign-in link is active now.",
}


async def _once_gone(tokens: Tokens, once: str) -> tuple[str, str] | None:
    """Why the one-time link ``once`` no longer signs in, and the command that prints a new
    one; None while it does."""
    refusal = await once_refusal(tokens, LOCAL_ADMIN, hash_token(once))
    if refusal is None:
        return None
    person = "NAME"
    if refusal is SignInRefusal.USED and (token := await tokens.active(LOCAL_ADMIN)) is not None:
        person = token.person or person  # the link's own person: the value is its spent mark
    return _GONE[refusal], _renew(person)


def _renew(person: str) -> str:
    return f"signoff login-link --person {person}"


async def _refused(
    request: web.Request, target: str, status: int, problem: str, renew: str | None = None
) -> web.Response:
    """The sign-in page with ``problem``; with ``renew``, a one-time link's: no form, only the
    command that prints a new link."""
    return await render(
        request,
        "login.html.j2",
        status=status,
        next=target,
        once=None,
        problem=problem,
        renew=renew,
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
