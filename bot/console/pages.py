"""Rendering pages: one jinja2 environment with the cards' escaping rules, and errors shown as
pages (the REST API keeps its JSON errors). Their security headers are ``bot.hygiene``'s.

Escaping: the environment is the cards' HTML one (``cards.html.html_environment``):
``autoescape`` is on for every template, and every interpolated value that is not already
``Markup`` goes through ``cards.text.visible`` (invisible and look-altering characters written
as ``\\uXXXX``) before jinja2 escapes it. The only ``Markup`` a page receives is the card
fragment that ``cards.web.render.render_web_card`` produced under the same rules.
"""

from __future__ import annotations

import functools
import logging
from datetime import UTC
from typing import Any

import jinja2
from aiohttp import web

from bot.api.errors import status_for
from bot.api.routing import Handler
from bot.console.context import page_context
from cards.html import html_environment
from engine.domain.errors import SignoffError
from engine.domain.timeline import human_duration

log = logging.getLogger(__name__)

ENV = html_environment(jinja2.PackageLoader("bot", "templates"))
ENV.filters["duration"] = human_duration
# Milliseconds, for the countdown script (bot/static/approval.js), which parses it.
ENV.filters["iso_ms"] = lambda moment: moment.astimezone(UTC).isoformat(timespec="milliseconds")
ENV.filters["clock"] = lambda moment: moment.astimezone(UTC).strftime("%H:%M:%S")
# Joins plain text (jinja2's own join would hand back Markup, skipping ``visible``).
ENV.filters["commas"] = lambda values: ", ".join(str(v) for v in values)

# The security headers every page carries are set in one place for every response:
# bot.hygiene.add_headers.


def fragment(template: str, **context: Any) -> str:
    """A template rendered without the page shell (the live timeline's items)."""
    return ENV.get_template(template).render(**context)


async def render(
    request: web.Request, template: str, *, status: int = 200, **context: Any
) -> web.Response:
    """A whole page: ``who`` (the signed-in principal) and ``csrf_token`` are always there."""
    ctx = page_context(request)
    who = await ctx.sessions.principal(request)
    csrf = ctx.sessions.csrf_token(request)
    html = ENV.get_template(template).render(who=who, csrf_token=csrf, **context)
    response = web.Response(text=html, status=status, content_type="text/html")
    ctx.sessions.set_csrf_cookie(request, response)
    return response


async def message(
    request: web.Request, status: int, title: str, text: str, *, tone: str = "bad"
) -> web.Response:
    context = {"title": title, "text": text, "tone": tone}
    return await render(request, "message.html.j2", status=status, **context)


def redirect(location: str) -> web.Response:
    """303 See Other: after a form, the browser GETs the page that shows what happened."""
    return web.Response(status=303, headers={"Location": location})


_TITLES = {400: "Not accepted", 401: "Sign in needed", 403: "Not allowed", 404: "Not found",
           409: "Already decided", 410: "No longer available", 422: "Not accepted"}  # fmt: skip


def page(handler: Handler) -> Handler:
    """Errors in a page handler become a page with the right status, never a JSON body."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except SignoffError as exc:
            status = status_for(exc)
            if status >= 500:
                log.error("%s %s: %s", request.method, request.path, exc.message)
            return await message(request, status, _TITLES.get(status, "Something went wrong"),
                                 exc.message)  # fmt: skip
        except web.HTTPException:
            raise
        except Exception:
            log.exception("unhandled error on %s %s", request.method, request.path)
            return await message(request, 500, "Something went wrong", "internal error")

    return wrapped
