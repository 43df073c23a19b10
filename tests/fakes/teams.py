"""A fake Bot Connector service: the ``serviceUrl`` Teams hands a bot, served by aiohttp on
127.0.0.1 port 0.

It answers the three calls a bot makes, the way the real service does:

    POST /v3/conversations/{conversationId}/activities               send (a new post)
    POST /v3/conversations/{conversationId}/activities/{activityId}  reply
    PUT  /v3/conversations/{conversationId}/activities/{activityId}  update

and enforces what the real one enforces (PLATFORM.md): per bot per conversation 7 messages per
1 s, 8 per 2 s, 60 per 30 s, 1800 per hour, and about 30 requests per second per app, each
answered with HTTP 429 and ``Retry-After`` when exceeded; a message over 40 KB, counted as
Teams documents it (the payload in UTF-16), gets 413 ``MessageSizeTooBig``. Updates of an
activity it never created get 404. A conversation id ending in ``;messageid=<root>`` posts
into that thread. Every accepted call is recorded; ``fail_next`` scripts failures (412, 502,
504 ...).

    async with FakeConnector() as connector:
        ... activities carry serviceUrl=connector.service_url ...
        card = connector.current(activity_id)
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

CONVERSATION_LIMITS = ((7, 1.0), (8, 2.0), (60, 30.0), (1800, 3600.0))
APP_LIMIT = (30, 1.0)
THREAD = ";messageid="
# "The bot message size limit is 40 KB ... the entire message payload encoded as UTF-16"
# (learn.microsoft.com/microsoftteams/platform/bots/how-to/format-your-bot-messages).
MAX_MESSAGE_BYTES = 40 * 1024


@dataclass
class Call:
    """One accepted call."""

    op: str  # send | reply | update
    conversation_id: str  # as addressed, with any ";messageid=" thread suffix
    activity_id: str
    activity: dict[str, Any]
    at: float  # loop time

    @property
    def conversation(self) -> str:
        return self.conversation_id.split(THREAD, 1)[0]

    @property
    def thread(self) -> str | None:
        _, sep, root = self.conversation_id.partition(THREAD)
        return root if sep else None

    @property
    def card(self) -> dict[str, Any] | None:
        for attachment in self.activity.get("attachments") or []:
            if attachment.get("contentType") == "application/vnd.microsoft.card.adaptive":
                content: dict[str, Any] = attachment["content"]
                return content
        return None


@dataclass
class Failure:
    status: int
    retry_after: float | None = None


@dataclass
class FakeConnector:
    conversation_limits: tuple[tuple[int, float], ...] = CONVERSATION_LIMITS
    app_limit: tuple[int, float] = APP_LIMIT
    calls: list[Call] = field(default_factory=list)
    throttled: list[tuple[str, str]] = field(default_factory=list)  # (op, conversation)
    failed: list[tuple[str, int]] = field(default_factory=list)  # scripted failures served
    peak_per_second: int = 0  # most calls accepted for one conversation within 1 s
    port: int = 0
    _activities: dict[str, dict[str, Any]] = field(default_factory=dict)
    _windows: dict[str, deque[float]] = field(default_factory=dict)
    _app_window: deque[float] = field(default_factory=deque)
    _script: deque[Failure] = field(default_factory=deque)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None
    _changed: asyncio.Condition | None = None

    @property
    def service_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def fail_next(self, status: int, *, times: int = 1, retry_after: float | None = None) -> None:
        """Answer the next ``times`` calls with ``status`` (and ``Retry-After``)."""
        self._script.extend(Failure(status, retry_after) for _ in range(times))

    def current(self, activity_id: str) -> dict[str, Any]:
        """The activity as it stands now (after updates)."""
        return self._activities[activity_id]

    def current_card(self, activity_id: str) -> dict[str, Any]:
        card = Call("", "", activity_id, self._activities[activity_id], 0.0).card
        assert card is not None, f"activity {activity_id} carries no card"
        return card

    def posts(self, conversation: str | None = None) -> list[Call]:
        """Sends and replies (not updates), in order."""
        return [
            c
            for c in self.calls
            if c.op != "update" and (conversation is None or c.conversation == conversation)
        ]

    def updates(self, activity_id: str | None = None) -> list[Call]:
        return [
            c
            for c in self.calls
            if c.op == "update" and (activity_id is None or c.activity_id == activity_id)
        ]

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> Any:
        """Wait until ``predicate(self)`` is truthy (calls arrive from the bot's outbox)."""
        assert self._changed is not None
        async with self._changed:
            return await asyncio.wait_for(self._changed.wait_for(lambda: predicate(self)), timeout)

    async def __aenter__(self) -> FakeConnector:
        self._changed = asyncio.Condition()
        app = web.Application()
        base = "/v3/conversations/{conversation}/activities"
        app.router.add_post(base, self._send)
        app.router.add_post(base + "/{activity}", self._reply)
        app.router.add_put(base + "/{activity}", self._update)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        # ``port`` 0 picks a free one; a test restarting Signoff may bring the connector back
        # on the port it had, as Teams keeps a conversation's serviceUrl.
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- handlers ------------------------------------------------------------------------------

    async def _send(self, request: web.Request) -> web.Response:
        return await self._accept(request, "send")

    async def _reply(self, request: web.Request) -> web.Response:
        return await self._accept(request, "reply")

    async def _update(self, request: web.Request) -> web.Response:
        if request.match_info["activity"] not in self._activities:
            return _error(404, "ActivityNotFound", "unknown activity")
        return await self._accept(request, "update")

    async def _accept(self, request: web.Request, op: str) -> web.Response:
        conversation_id = request.match_info["conversation"]
        conversation = conversation_id.split(THREAD, 1)[0]
        try:
            activity = await request.json()
        except json.JSONDecodeError:
            return _error(400, "BadSyntax", "the body is not JSON")
        if not isinstance(activity, dict) or activity.get("type") != "message":
            return _error(400, "BadArgument", "a message activity is required")
        if len(json.dumps(activity, ensure_ascii=False).encode("utf-16-le")) > MAX_MESSAGE_BYTES:
            return _error(413, "MessageSizeTooBig", "the message is too large")
        if self._script:
            failure = self._script.popleft()
            self.failed.append((op, failure.status))
            headers = {}
            if failure.retry_after is not None:
                headers["Retry-After"] = str(failure.retry_after)
            return _error(failure.status, "ScriptedFailure", "scripted", headers)
        wait = self._throttle(conversation)
        if wait is not None:
            self.throttled.append((op, conversation))
            return _error(429, "Throttled", "too many requests", {"Retry-After": str(wait)})
        if op == "update":
            activity_id = request.match_info["activity"]
        else:
            activity_id = f"{next(self._ids):013d}"
        self._activities[activity_id] = activity
        now = asyncio.get_running_loop().time()
        self.calls.append(Call(op, conversation_id, activity_id, activity, now))
        recent = sum(1 for c in self.calls if c.conversation == conversation and now - c.at < 1.0)
        self.peak_per_second = max(self.peak_per_second, recent)
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()
        return web.json_response({"id": activity_id}, status=200 if op == "update" else 201)

    def _throttle(self, conversation: str) -> int | None:
        """Seconds to wait when a limit is full (nothing recorded), else None (recorded)."""
        now = asyncio.get_running_loop().time()
        window = self._windows.setdefault(conversation, deque())
        longest = max(seconds for _, seconds in self.conversation_limits)
        while window and now - window[0] >= longest:
            window.popleft()
        while self._app_window and now - self._app_window[0] >= self.app_limit[1]:
            self._app_window.popleft()
        waits: list[float] = []
        for count, seconds in self.conversation_limits:
            inside = [t for t in window if now - t < seconds]
            if len(inside) >= count:
                waits.append(inside[-count] + seconds - now)
        if len(self._app_window) >= self.app_limit[0]:
            waits.append(self._app_window[-self.app_limit[0]] + self.app_limit[1] - now)
        if waits:
            return max(1, math.ceil(max(waits)))
        window.append(now)
        self._app_window.append(now)
        return None


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = {"error": {"code": code, "message": message}}
    return web.json_response(body, status=status, headers=headers)
