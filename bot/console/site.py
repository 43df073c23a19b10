"""The pages every site has: a 404 page in the site's layout for any path that is not the API's,
``/favicon.ico``, the files under ``/static/``, and the ``/privacy`` and ``/terms`` pages the
Teams app package links to (``bot.teams.package``: ``developer.privacyUrl`` and
``termsOfUseUrl``).

API paths (``bot.api.errors.is_api_path``) keep their JSON errors; everything else that aiohttp
answers with 404 or 405 gets a page instead of aiohttp's plain text.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from bot.api.errors import is_api_path
from bot.api.routing import Handler
from bot.console.pages import message, page, render

routes = web.RouteTableDef()
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
FAVICON = STATIC_DIR / "favicon.ico"
# The files /static/ serves, found once: a name not here is the 404 page. (aiohttp's
# add_static answers a missing file with an empty, untyped 404 its middleware never sees.)
STATIC_FILES = {path.name: path for path in STATIC_DIR.iterdir() if path.is_file()}


@web.middleware
async def not_found_pages(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own 404 and 405 answers, as pages in the site's layout (not for the API)."""
    if is_api_path(request.path):
        return await handler(request)
    try:
        return await handler(request)
    except web.HTTPNotFound:
        text = "There is no page at this address. It may have moved, or the link is mistyped."
        return await message(request, 404, "Not found", text)
    except web.HTTPMethodNotAllowed as exc:
        text = f"This page does not accept {request.method} requests."
        response = await message(request, 405, "Not allowed", text)
        response.headers["Allow"] = ",".join(sorted(exc.allowed_methods))
        return response


@routes.get("/favicon.ico")
async def favicon(request: web.Request) -> web.StreamResponse:
    # The security headers come from bot.hygiene, which leaves this one cacheable.
    headers = {"Cache-Control": "public, max-age=86400", "Content-Type": "image/x-icon"}
    return web.FileResponse(FAVICON, headers=headers)


@routes.get("/static/{name}")
async def static_file(request: web.Request) -> web.StreamResponse:
    found = STATIC_FILES.get(request.match_info["name"])
    if found is None:
        raise web.HTTPNotFound()  # not_found_pages: the site's 404 page
    return web.FileResponse(found)


@routes.get("/privacy")
@page
async def privacy(request: web.Request) -> web.StreamResponse:
    return await render(request, "privacy.html.j2")


@routes.get("/terms")
@page
async def terms(request: web.Request) -> web.StreamResponse:
    return await render(request, "terms.html.j2")
