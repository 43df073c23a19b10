"""A real forward proxy on 127.0.0.1, port 0, that records where each request was going.

It speaks what HTTP clients send to a proxy: ``CONNECT host:port`` (then a tunnel; https, or
any client that tunnels) and an absolute-form request (``POST http://host:port/path``, plain
http through a proxy), which it forwards to the origin as an origin-form request on a fresh
connection, one request per client connection (``Connection: close``). Anything else is a 400,
as a real proxy answers. ``seen`` holds ``host:port`` for every request, in order, so a test can
tell "went through the proxy" from "went directly".

    async with RecordingProxy() as proxy:
        env = {"http_proxy": proxy.url, "NO_PROXY": "127.0.0.1"}
        ...
        assert proxy.seen == []
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from urllib.parse import urlsplit

_HEAD_LIMIT = 64 * 1024
_HOP_BY_HOP = (b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization")


@dataclass
class RecordingProxy:
    """The proxy; ``url`` is what ``http_proxy`` / ``https_proxy`` are set to."""

    seen: list[str] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> RecordingProxy:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > _HEAD_LIMIT:
            return
        request_line, *header_lines = head[:-4].split(b"\r\n")
        method, target, version = request_line.decode("latin-1").split(" ")
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            self.seen.append(target)
            up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await _pipe_both(reader, writer, up_reader, up_writer)
            return
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return
        port = parts.port or 80
        self.seen.append(f"{parts.hostname}:{port}")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        kept = [h for h in header_lines if h.split(b":", 1)[0].strip().lower() not in _HOP_BY_HOP]
        forwarded = b"\r\n".join(
            [f"{method} {path} {version}".encode("latin-1"), *kept, b"Connection: close"]
        )
        up_reader, up_writer = await asyncio.open_connection(parts.hostname, port)
        up_writer.write(forwarded + b"\r\n\r\n")
        await _pipe_both(reader, writer, up_reader, up_writer)


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Copy bytes both ways until the origin closes (it was told ``Connection: close``, or the
    tunnel ends)."""
    upstream = asyncio.create_task(_copy(reader, up_writer))
    try:
        await _copy(up_reader, writer)
    finally:
        upstream.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await upstream
        up_writer.close()


async def _copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    while chunk := await source.read(65536):
        sink.write(chunk)
        await sink.drain()
