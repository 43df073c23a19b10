"""HTTP hygiene in one place: the headers every response carries, and the checks every path id,
query and console form value passes before a handler sees it.

Headers (``add_headers``, an ``on_response_prepare`` signal, so aiohttp's own 404 and 405 answers
and error pages carry them too; ``bot.serving`` adds them to the answers aiohttp's HTTP parser
gives before any of that runs): ``Server: Signoff`` (no aiohttp or Python version), the pages'
security headers (``SECURITY_HEADERS``) on every response, ``Cache-Control: no-store`` on all but
the static files found, and ``Strict-Transport-Security`` when ``server.publicUrl`` is https.

Input (``input_middleware``): a NUL or a lone surrogate in a path id or a query of the API or the
web pages is refused with 400 before it reaches the database (PostgreSQL refuses NUL in text with
an error that would be a 503); so is one in a console or approval form field. The Slack and
Teams endpoints check their own input (their bodies are signed and parsed there).
"""

from __future__ import annotations

from aiohttp import web

from bot.api.errors import is_api_path
from bot.api.routing import Handler
from bot.keys import CONFIG
from engine.domain.errors import InvalidRequest
from engine.domain.json_input import check_text

SERVER = "Signoff"
HSTS = "max-age=31536000"
# Pages load nothing from elsewhere and run only our own script (the live timeline); forms post
# only to us. no-referrer: a signed approval link in the address bar must not leak onwards.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; "
        "img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_PAGE_PREFIXES = ("/console", "/approvals")
_CACHEABLE = ("/static/", "/favicon.ico")  # files that never hold anyone's data
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


def is_page_path(path: str) -> bool:
    """A path of the server's pages that take forms: the console's and the approval page's."""
    return any(path == p or path.startswith(p + "/") for p in _PAGE_PREFIXES)


def stamp(response: web.StreamResponse, path: str, *, hsts: bool) -> None:
    """Set the headers every response carries (see the module's docstring) on ``response``,
    an answer to ``path``; ``hsts`` when the public URL is https."""
    headers = response.headers
    headers["Server"] = SERVER
    for name, value in SECURITY_HEADERS.items():
        headers.setdefault(name, value)
    if not path.startswith(_CACHEABLE) or response.status >= 400:  # a 404 is not the file
        headers["Cache-Control"] = "no-store"
    if hsts:
        headers.setdefault("Strict-Transport-Security", HSTS)


def wants_hsts(public_url: str) -> bool:
    return public_url.startswith("https://")


async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``stamp`` every answer of the application (an ``on_response_prepare`` signal); the
    answers aiohttp's parser gives before the application sees a request are ``bot.serving``'s."""
    stamp(response, request.path, hsts=wants_hsts(request.app[CONFIG].server.public_url))


def check_request_text(request: web.Request) -> None:
    """``InvalidRequest`` if a path id or a query name or value holds a NUL or lone surrogate."""
    for name, value in request.match_info.items():
        check_text(value, f"path.{name}")
    for name, value in request.query.items():
        check_text(name, "a query parameter's name")
        check_text(value, f"query.{name[:50]}")


async def check_form(request: web.Request) -> None:
    """The same checks for every text field of a console or approval form."""
    if request.method != "POST" or request.content_type not in _FORMS:
        return
    try:
        form = await request.post()  # aiohttp keeps it: the handler's post() reads it again
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"the form could not be read: {exc}") from None
    for name, value in form.items():
        check_text(name, "a form field's name")
        if isinstance(value, str):
            check_text(value, f"form.{name[:50]}")


@web.middleware
async def input_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse NULs and lone surrogates in paths, queries and console forms with 400 (the API's
    JSON error; a page on the web paths)."""
    if is_api_path(request.path):
        check_request_text(request)  # error_middleware turns InvalidRequest into JSON
    elif is_page_path(request.path):
        try:
            check_request_text(request)
            await check_form(request)
        except InvalidRequest as exc:
            from bot.console.pages import message  # bot.console imports the API's errors

            return await message(request, 400, "Not accepted", exc.message)
    return await handler(request)
