"""Serving the application on a listening socket, with Signoff's headers on every answer.

aiohttp answers a request its HTTP parser refuses (a bad ``Content-Length``, a request line or
header over 8,190 bytes, ``Transfer-Encoding`` with ``Content-Length``, a NUL, a bad version or
method) from ``RequestHandler.handle_error``, before any middleware or ``on_response_prepare``
signal runs, so that answer named aiohttp's and Python's versions and carried none of the
security headers (aiohttp issue 6463; it has no option for it). ``_Connection`` overrides that
one method: the answer is the API's ``{error, message}`` JSON with the headers of
``bot.hygiene.stamp``, and a one-line log instead of a traceback (a malformed request is the
client's mistake, not the server's). ``Application`` builds its ``Server`` with no way to name
another connection class, hence ``_Server`` and ``_Runner``.

``serve`` does what ``web.run_app`` did for ``signoff serve``: SIGINT or SIGTERM stops
accepting, lets in-flight requests finish (``shutdown_timeout``), then runs the application's
cleanup (which stops the workers at a commit point).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from bot.api.errors import error_response
from bot.hygiene import stamp

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 75.0  # as web.run_app
_MESSAGE_CHARS = 200


def refusal_text(exc: BaseException | None, message: str | None) -> str:
    """What the parser found, in one line: aiohttp's message quotes the offending bytes on
    further lines, which the answer leaves out."""
    found = exc.message if isinstance(exc, HttpProcessingError) else (message or "")
    first = next((line.strip() for line in str(found).splitlines() if line.strip()), "")
    what = first.rstrip(":")[:_MESSAGE_CHARS] or "unreadable request"
    return f"this request is not valid HTTP ({what}); nothing was done"


class _Connection(RequestHandler):
    """aiohttp's connection, answering parser errors as Signoff answers everything else."""

    __slots__ = ("hsts",)

    def __init__(self, manager: web.Server, *, hsts: bool, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self.hsts = hsts

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500 or request.writer.output_size > 0:
            response = super().handle_error(request, status, exc, message)  # logs the traceback
        else:
            text = refusal_text(exc, message)
            log.info("refused a malformed request from %s: %s", request.remote, text)
            response = error_response(status, "bad_request", text)
            response.force_close()  # as aiohttp: the rest of the stream cannot be trusted
        stamp(response, "/", hsts=self.hsts)
        return response


class _Server(web.Server):
    """aiohttp's server whose connections are ``_Connection``s."""

    def __init__(self, *args: Any, hsts: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hsts = hsts

    def __call__(self) -> RequestHandler:
        return _Connection(self, loop=self._loop, hsts=self.hsts, **self._kwargs)


class _Runner(web.AppRunner):
    """``web.AppRunner`` serving the application through ``_Server``."""

    def __init__(self, app: web.Application, *, hsts: bool, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.hsts = hsts

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()  # starts the application, as AppRunner does
        return _Server(
            plain.request_handler,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            loop=asyncio.get_running_loop(),
            hsts=self.hsts,
            **plain._kwargs,
        )


async def serve(
    app: web.Application,
    sock: socket.socket,
    *,
    hsts: bool,
    shutdown_timeout: float,
    on_hangup: Callable[[], Coroutine[Any, Any, object]] | None = None,
) -> None:
    """Serve ``app`` on ``sock`` until SIGINT or SIGTERM, then stop gracefully; each SIGHUP
    runs ``on_hangup`` (the configuration's reload, ``bot.reload``)."""
    runner = _Runner(
        app,
        hsts=hsts,
        shutdown_timeout=shutdown_timeout,
        keepalive_timeout=KEEPALIVE_SECONDS,
        access_log=None,
    )
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        hangups: set[asyncio.Task[object]] = set()  # kept: the loop holds tasks weakly
        if on_hangup is not None:

            def hangup() -> None:
                task = loop.create_task(on_hangup(), name="signoff-reload")
                hangups.add(task)
                task.add_done_callback(_finished(hangups))

            loop.add_signal_handler(signal.SIGHUP, hangup)
        await stop.wait()
        if on_hangup is not None:  # no reload while stopping, and no end by SIGHUP either
            loop.remove_signal_handler(signal.SIGHUP)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
    finally:
        await runner.cleanup()


def _finished(tasks: set[asyncio.Task[object]]) -> Callable[[asyncio.Task[object]], None]:
    """Forget a finished reload task; log it if it failed (a reload reports its own refusals)."""

    def done(task: asyncio.Task[object]) -> None:
        tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("reload failed", exc_info=exc)

    return done
