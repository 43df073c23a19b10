"""The console's away page: the signed-in person's own absence (whether, until when, who
decides for them) with a form to set or end it, and for admins every absence in force, each
with a button that ends it. Forms carry the CSRF token like every console form; the person
away is always the signed-in one (an admin ends anyone's). The rules are
``engine.domain.delegation``'s, through ``engine.services.delegations``."""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from bot.console.console import console_page
from bot.console.context import page_context
from bot.console.pages import redirect, render
from bot.console.security import CSRF_FIELD
from engine.domain.delegation import MAX_UNTIL_TEXT, parse_until
from engine.domain.errors import Forbidden, InvalidRequest
from engine.domain.model import Principal

routes = web.RouteTableDef()
PAGE = "/console/away"


async def _signed_in(request: web.Request) -> Principal:
    who = await page_context(request).sessions.principal(request)
    if who is None:  # console_page sent anyone else to sign in first
        raise Forbidden("sign in first")
    return who


def _field(form: Mapping[str, object], name: str, limit: int = 200) -> str:
    value = form.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{name} is missing")
    if len(value) > limit:
        raise InvalidRequest(f"{name} is longer than {limit} characters")
    return value.strip()


def _person(who: Principal) -> str:
    if who.person is None:
        raise Forbidden("this session's token names no person, so it cannot be away")
    return who.person


@routes.get(PAGE)
@console_page
async def away_page(request: web.Request) -> web.StreamResponse:
    engine = page_context(request).engine
    who = await _signed_in(request)
    mine = None if who.person is None else await engine.delegations.away(who, who.person)
    everyone = await engine.delegations.current(who) if who.is_admin else None
    people = sorted(p for p in engine.config.people if p != who.person)
    return await render(request, "away.html.j2", mine=mine, everyone=everyone, people=people)


async def _posted(request: web.Request) -> tuple[Mapping[str, object], Principal]:
    """A form posted to this page, once its CSRF token holds, and who posted it."""
    form = await request.post()
    page_context(request).sessions.check_csrf(request, form.get(CSRF_FIELD))
    return form, await _signed_in(request)


@routes.post(PAGE)
@console_page
async def set_away(request: web.Request) -> web.StreamResponse:
    form, who = await _posted(request)
    until = parse_until(_field(form, "until", MAX_UNTIL_TEXT))
    delegations = page_context(request).engine.delegations
    await delegations.set_away(who, _person(who), until, _field(form, "delegate"))
    return redirect(PAGE)


@routes.post(PAGE + "/end")
@console_page
async def end_away(request: web.Request) -> web.StreamResponse:
    form, who = await _posted(request)
    await page_context(request).engine.delegations.end_away(who, _field(form, "person"))
    return redirect(PAGE)
