"""Server-Sent Events for the pages that follow something live: the run page's timeline
(``events``), the console's queue (``inbox``) and the approval page (``bot.web.live``).

Every stream polls the store, so it is right on every replica whichever worker moved what it
shows, and sends HTML fragments rendered by the page's own templates (escaped there, once; the
script only places them, ``bot/static/live.js``). What a stream says:

* ``replace``: a fragment whose root element's id says which element of the page it replaces,
  sent only when it differs from the last one sent for that id;
* ``end``: what it followed has ended; the script closes the stream (a browser would otherwise
  reconnect) and the server closes it too;
* a comment every ``HEARTBEAT_SECONDS`` keeps proxies from closing an idle stream.

A stream lasts at most ``PageContext.stream_seconds`` (5 min); then the server closes it without
``end`` and the browser reconnects, checked again like the page (a revoked token or an expired
session gets 401, which stops the browser from retrying). Server shutdown ends every stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from bot.console.context import PageContext, page_context

HEARTBEAT_SECONDS = 15.0
HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
}


def event_text(event: str, data: str, event_id: int | str | None = None) -> bytes:
    """One SSE event; a multi-line ``data`` is sent as several ``data:`` lines."""
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    text = data.replace("\r\n", "\n").replace("\r", "\n")
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


class EventStream:
    """One open stream: what it has sent, its heartbeat and its pace."""

    def __init__(self, ctx: PageContext, response: web.StreamResponse) -> None:
        self.ctx = ctx
        self.response = response
        self._sent: dict[str, str] = {}  # element id -> the fragment last sent for it
        loop = asyncio.get_running_loop()
        self._beat = loop.time()
        self._until = loop.time() + ctx.stream_seconds

    async def send(self, event: str, data: str, event_id: int | str | None = None) -> None:
        await self.response.write(event_text(event, data, event_id))

    async def replace(self, element: str, html: str) -> bool:
        """Send ``html`` for the element ``element`` unless it is what was sent last."""
        if self._sent.get(element) == html:
            return False
        self._sent[element] = html
        await self.send("replace", html)
        return True

    async def pause(self) -> bool:
        """Wait for the next poll: False when the stream should close (the server is shutting
        down, or the stream has lived its time and the browser is to reconnect)."""
        loop = asyncio.get_running_loop()
        if loop.time() >= self._until:
            return False
        if loop.time() - self._beat >= HEARTBEAT_SECONDS:
            self._beat = loop.time()
            await self.response.write(b": keep-alive\n\n")
        try:
            await asyncio.wait_for(self.ctx.closing.wait(), self.ctx.poll_seconds)
        except TimeoutError:
            return True
        return False


async def stream(
    request: web.Request,
    follow: Callable[[EventStream], Awaitable[None]],
    *,
    response: web.StreamResponse | None = None,
) -> web.StreamResponse:
    """Open an event stream on ``request`` and run ``follow`` on it until it returns or the
    browser goes away. ``response``: one prepared by the caller's headers (a cookie), else a
    new one."""
    response = response or new_response()
    await response.prepare(request)
    try:
        await follow(EventStream(page_context(request), response))
    except ConnectionResetError:
        pass  # the browser went away
    return response


def new_response() -> web.StreamResponse:
    """A response with the stream's headers, not yet prepared."""
    return web.StreamResponse(headers=HEADERS)
