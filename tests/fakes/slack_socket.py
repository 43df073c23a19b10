"""A fake Slack with Socket Mode: ``FakeSlack``'s Web API plus ``apps.connections.open`` and the
WebSocket protocol, on 127.0.0.1, as strict as Slack where a client could get it wrong.

* ``apps.connections.open`` takes only the app-level token (``Bearer xapp-...``): a bot token
  is ``not_allowed_token_type``, any other ``invalid_auth``. It answers a ``ws://127.0.0.1``
  URL with a one-use ticket (a second connection with it, or an unknown one, is refused 401).
* On connect the fake sends ``hello``. ``send`` puts an envelope (``events_api``,
  ``interactive``, ``slash_commands``) on the newest socket; the client must answer
  ``{"envelope_id"}``, with a ``payload`` only where the envelope ``accepts_response_payload``.
  An answer naming an envelope the fake did not send (or one already answered), a payload
  where none is accepted, or a frame that is not JSON lands in ``violations``; an answer
  later than Slack's 3 s (loop time) in ``late``.
* ``drop`` closes the current socket (the client must come back through a new
  ``apps.connections.open``); ``refresh`` sends ``disconnect`` (``refresh_requested``) and closes
  the old socket once the client has opened a new one, as Slack does; ``redeliver`` sends an
  envelope again with its ``envelope_id`` and ``retry_attempt`` + 1, as Slack does when it saw
  no answer.

    async with FakeSlackSocket() as slack:
        # slack: {botToken: <slack.token>, socketMode: true, appToken: <slack.app_token>,
        #         apiBaseUrl: <slack.api_url>}
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.slack import Call, FakeSlack
from tests.support.waiting import until

ACK_SECONDS = 3.0  # Slack redelivers an envelope not answered within 3 s


@dataclass
class Envelope:
    envelope_id: str
    type: str
    payload: dict[str, Any]
    accepts_response_payload: bool
    retry_attempt: int = 0
    retry_reason: str = ""
    sent_at: float = 0.0

    def frame(self) -> dict[str, Any]:
        return {
            "envelope_id": self.envelope_id,
            "type": self.type,
            "payload": self.payload,
            "accepts_response_payload": self.accepts_response_payload,
            "retry_attempt": self.retry_attempt,
            "retry_reason": self.retry_reason,
        }


@dataclass
class Ack:
    envelope_id: str
    payload: dict[str, Any] | None
    connection: int  # which socket (1 = the first) carried it
    after: float  # seconds after the envelope was sent


@dataclass
class FakeSlackSocket(FakeSlack):
    app_token: str = "xapp-1-A0SIGNOFF-1-fake"
    app_id: str = "A0SIGNOFF"
    opened: list[str] = field(default_factory=list)  # tickets issued by apps.connections.open
    connections: int = 0  # sockets accepted so far
    acks: list[Ack] = field(default_factory=list)
    late: list[Ack] = field(default_factory=list)
    socket_violations: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._tickets: set[str] = set()
        self._sockets: dict[int, web.WebSocketResponse] = {}
        self._transports: dict[int, asyncio.Transport] = {}
        self._pending: dict[str, Envelope] = {}
        self._envelopes: dict[str, Envelope] = {}
        self._acked: dict[str, asyncio.Future[Ack]] = {}
        self._ids = itertools.count(1)
        self._socket_runner: web.AppRunner | None = None
        self._socket_port = 0

    # -- setup ---------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeSlackSocket:
        await super().__aenter__()
        app = web.Application()
        app.router.add_get("/link/", self._link)
        self._socket_runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
        await self._socket_runner.setup()
        await web.TCPSite(self._socket_runner, "127.0.0.1", 0).start()
        self._socket_port = self._socket_runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for ws in list(self._sockets.values()):
            await ws.close()
        if self._socket_runner is not None:
            await self._socket_runner.cleanup()
        await super().__aexit__(*exc)

    # -- what tests do -------------------------------------------------------------------------

    @property
    def open_sockets(self) -> int:
        return len(self._sockets)

    async def connected(self, count: int = 1) -> None:
        """Wait until ``count`` sockets have been accepted (and greeted) in all."""
        await until(lambda: self.connections >= count and self.connections in self._sockets)

    async def send(
        self, kind: str, payload: dict[str, Any], *, accepts_response_payload: bool | None = None
    ) -> Envelope:
        """Put an envelope on the newest socket; returns it (``ack`` waits for its answer)."""
        if accepts_response_payload is None:
            accepts_response_payload = kind in ("interactive", "slash_commands")
        envelope = Envelope(
            envelope_id=f"{next(self._ids):04d}-{secrets.token_hex(8)}",
            type=kind,
            payload=payload,
            accepts_response_payload=accepts_response_payload,
        )
        await self._deliver(envelope)
        return envelope

    async def redeliver(self, envelope: Envelope, reason: str = "timeout") -> Envelope:
        """The same envelope again, as Slack resends one it saw no answer to."""
        again = Envelope(
            envelope_id=envelope.envelope_id,
            type=envelope.type,
            payload=envelope.payload,
            accepts_response_payload=envelope.accepts_response_payload,
            retry_attempt=envelope.retry_attempt + 1,
            retry_reason=reason,
        )
        await self._deliver(again)
        return again

    async def ack(self, envelope: Envelope, timeout: float = 10.0) -> Ack:
        """The client's answer to ``envelope`` (its latest delivery)."""
        return await asyncio.wait_for(asyncio.shield(self._acked[envelope.envelope_id]), timeout)

    async def drop(self, *, abrupt: bool = False) -> None:
        """Close the current socket, as a Slack restart does; ``abrupt``: cut its connection
        with no closing handshake, as a network drop does (the client notices by its ping)."""
        number = self.connections
        if abrupt:
            self._transports[number].abort()
        else:
            await self._sockets[number].close()

    async def refresh(self) -> None:
        """``disconnect`` (``refresh_requested``); the old socket closes once a new one is open."""
        number = self.connections
        old = self._sockets[number]
        await old.send_json(
            {
                "type": "disconnect",
                "reason": "refresh_requested",
                "debug_info": {"host": "applink-fake"},
            }
        )
        await self.connected(number + 1)
        await old.close()

    # -- the server ----------------------------------------------------------------------------

    async def _deliver(self, envelope: Envelope) -> None:
        await self.connected(1)
        envelope.sent_at = asyncio.get_running_loop().time()
        self._pending[envelope.envelope_id] = envelope
        self._envelopes[envelope.envelope_id] = envelope
        self._acked[envelope.envelope_id] = asyncio.get_running_loop().create_future()
        await self._sockets[self.connections].send_json(envelope.frame())

    async def _api(self, request: web.Request) -> web.Response:
        if request.match_info["method"] != "apps.connections.open":
            return await super()._api(request)
        call = Call("apps.connections.open", {}, asyncio.get_running_loop().time())
        self.calls.append(call)
        auth = request.headers.get("Authorization", "")
        if auth == f"Bearer {self.token}":
            return self._error(call, "not_allowed_token_type")
        if auth != f"Bearer {self.app_token}":
            return self._error(call, "invalid_auth")
        ticket = secrets.token_hex(16)
        self._tickets.add(ticket)
        self.opened.append(ticket)
        url = f"ws://127.0.0.1:{self._socket_port}/link/?ticket={ticket}&app_id={self.app_id}"
        return web.json_response({"ok": True, "url": url})

    async def _link(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            self.socket_violations.append(f"connection with an unknown or used ticket {ticket!r}")
            return web.Response(status=401, text="invalid ticket")
        self._tickets.discard(ticket)  # one connection per apps.connections.open
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        number = self.connections
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets) + 1,
                "debug_info": {"host": "applink-fake", "approximate_connection_time": 18060},
                "connection_info": {"app_id": self.app_id},
            }
        )
        self._sockets[number] = ws
        assert isinstance(request.transport, asyncio.Transport)
        self._transports[number] = request.transport
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    self._answer(message.data, number)
        finally:
            self._sockets.pop(number, None)
            self._transports.pop(number, None)
        return ws

    def _answer(self, data: str, connection: int) -> None:
        try:
            answer = json.loads(data)
        except ValueError:
            self.socket_violations.append(f"a frame that is not JSON: {data[:80]!r}")
            return
        envelope_id = answer.get("envelope_id") if isinstance(answer, dict) else None
        envelope = self._pending.pop(str(envelope_id), None)
        if envelope is None:
            self.socket_violations.append(f"an answer to no pending envelope: {data[:120]}")
            return
        payload = answer.get("payload")
        if payload is not None and not envelope.accepts_response_payload:
            self.socket_violations.append(f"a payload for {envelope.type}, which takes none")
        after = asyncio.get_running_loop().time() - envelope.sent_at
        ack = Ack(str(envelope_id), payload, connection, after)
        self.acks.append(ack)
        if after > ACK_SECONDS:
            self.late.append(ack)
        future = self._acked[ack.envelope_id]
        if future.done():  # a redelivery's answer: keep the latest one to read
            self._acked[ack.envelope_id] = future = asyncio.get_running_loop().create_future()
        future.set_result(ack)
