"""A fake Slack Web API: real aiohttp on 127.0.0.1, port 0, recording what it receives.

It answers the methods Signoff calls (``chat.postMessage``, ``chat.update``,
``chat.getPermalink``, ``conversations.history``, ``conversations.replies``, ``views.open``,
``chat.postEphemeral``, ``auth.test``) the way Slack does, and refuses what Slack refuses:

* a wrong bearer token: ``invalid_auth``;
* Block Kit over the limits (``cards.limits.check_blocks``): ``invalid_blocks``;
* a channel in ``missing_channels``: ``channel_not_found``; ``chat.update`` of an unknown
  message: ``message_not_found``;
* more than ``rate`` ``chat.postMessage`` calls in one second into one channel: HTTP 429 with
  ``Retry-After: <retry_after>``; until that time has passed, every call into that channel is
  refused again and counted in ``violations`` (a client that did not wait).

Messages are kept per channel with their metadata, so ``conversations.history`` /
``conversations.replies`` (``include_all_metadata``) can be searched. Interaction responses
(``response_url``) are served at ``/response/<id>`` and recorded in ``responses``.

    async with FakeSlack(rate=50) as slack:
        # slack: {botToken: <slack.token>, signingSecret: ..., apiBaseUrl: <slack.api_url>}
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from cards.limits import check_blocks


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[Any] | None
    thread_ts: str | None
    metadata: dict[str, Any] | None
    updates: int = 0

    @property
    def dedupe(self) -> str | None:
        return ((self.metadata or {}).get("event_payload") or {}).get("dedupe")

    def as_api(self, with_metadata: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.text}
        if self.blocks is not None:
            out["blocks"] = self.blocks
        if self.thread_ts is not None:
            out["thread_ts"] = self.thread_ts
        if with_metadata and self.metadata is not None:
            out["metadata"] = self.metadata
        return out


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    at: float  # loop time when received
    status: int = 200
    error: str | None = None


@dataclass
class Response:
    """A POST to a ``response_url``."""

    key: str
    body: dict[str, Any]


@dataclass
class FakeSlack:
    token: str = "xoxb-fake-token"
    rate: int | None = None  # chat.postMessage per channel per second; None: no limit
    retry_after: int = 1  # seconds, as Slack sends them
    post_delay: float = 0.0  # seconds before answering chat.postMessage (after recording it)
    missing_channels: set[str] = field(default_factory=set)
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, list[Message]] = field(default_factory=lambda: defaultdict(list))
    responses: list[Response] = field(default_factory=list)
    views: list[dict[str, Any]] = field(default_factory=list)
    violations: list[tuple[str, float, float]] = field(default_factory=list)
    rate_limited: int = 0
    port: int = 0

    def __post_init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self._sent: dict[str, deque[float]] = defaultdict(deque)
        self._blocked_until: dict[str, float] = {}
        self._ts = itertools.count(1)
        self._ts_base = int(time.time())
        self._scripted: dict[str, deque[tuple[int, str]]] = defaultdict(deque)

    # -- setup ---------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def response_url(self, key: object) -> str:
        return f"{self.url}/response/{key}"

    def fail_next(self, method: str, error: str, status: int = 200) -> None:
        """The next call of ``method`` answers ``{ok: false, error}`` with HTTP ``status``."""
        self._scripted[method].append((status, error))

    async def __aenter__(self) -> FakeSlack:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_post("/response/{key}", self._response)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- what tests read -----------------------------------------------------------------------

    def calls_of(self, method: str, *, ok: bool | None = None) -> list[Call]:
        return [
            c
            for c in self.calls
            if c.method == method and (ok is None or (c.status == 200 and c.error is None) == ok)
        ]

    def posted(self, channel: str | None = None) -> list[Message]:
        chans = [channel] if channel else list(self.messages)
        return [m for ch in chans for m in self.messages.get(ch, [])]

    def thread(self, channel: str, root_ts: str) -> list[Message]:
        """The root (when ours) and its replies, oldest first."""
        return [m for m in self.messages.get(channel, []) if root_ts in (m.ts, m.thread_ts)]

    def duplicates(self) -> dict[str, int]:
        counts = Counter(m.dedupe for m in self.posted() if m.dedupe)
        return {k: n for k, n in counts.items() if n > 1}

    def find(self, channel: str, ts: str) -> Message | None:
        return next((m for m in self.messages.get(channel, []) if m.ts == ts), None)

    # -- the server ----------------------------------------------------------------------------

    async def _response(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.responses.append(Response(request.match_info["key"], body))
        return web.Response(text="ok")

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.body_exists:
            if request.content_type == "application/json":
                args.update(await request.json())
            else:
                args.update(dict(await request.post()))
        call = Call(method, args, asyncio.get_running_loop().time())
        self.calls.append(call)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return self._error(call, "invalid_auth")
        if self._scripted[method]:
            status, error = self._scripted[method].popleft()
            return self._error(call, error, status)
        handler = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.getPermalink": self._permalink,
            "chat.postEphemeral": self._ephemeral,
            "conversations.history": self._history,
            "conversations.replies": self._replies,
            "views.open": self._views_open,
        }.get(method)
        if handler is None:
            return self._error(call, "unknown_method", 404)
        return await handler(call)

    def _error(self, call: Call, error: str, status: int = 200, **extra: Any) -> web.Response:
        call.status, call.error = status, error
        headers = {"Retry-After": str(self.retry_after)} if status == 429 else None
        return web.json_response(
            {"ok": False, "error": error, **extra}, status=status, headers=headers
        )

    async def _auth_test(self, call: Call) -> web.Response:
        return web.json_response(
            {"ok": True, "team_id": "T0FAKE", "user_id": "U0SIGNOFF", "bot_id": "B0SIGNOFF"}
        )

    def _channel_problem(self, call: Call) -> web.Response | None:
        """Unknown channels, and any call into a channel that was told to wait."""
        channel = call.args.get("channel")
        if not channel or channel in self.missing_channels:
            return self._error(call, "channel_not_found")
        now = asyncio.get_running_loop().time()
        blocked = self._blocked_until.get(channel)
        if blocked is not None and now < blocked:
            self.violations.append((channel, now, blocked))
            return self._error(call, "ratelimited", 429)
        return None

    def _blocks(self, call: Call) -> tuple[list[Any] | None, web.Response | None]:
        blocks = call.args.get("blocks")
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        if blocks is not None:
            problems = check_blocks(blocks)
            if problems:
                return None, self._error(call, "invalid_blocks", errors=problems)
        if not call.args.get("text") and not blocks:
            return None, self._error(call, "no_text")
        return blocks, None

    def _rate_limited(self, channel: str) -> bool:
        now = asyncio.get_running_loop().time()
        window = self._sent[channel]
        while window and window[0] <= now - 1.0:
            window.popleft()
        if self.rate is not None and len(window) >= self.rate:
            self._blocked_until[channel] = now + self.retry_after
            self.rate_limited += 1
            return True
        window.append(now)
        return False

    def _next_ts(self) -> str:
        n = next(self._ts)
        return f"{self._ts_base + n // 1_000_000}.{n % 1_000_000:06d}"

    async def _post_message(self, call: Call) -> web.Response:
        problem = self._channel_problem(call)
        if problem is not None:
            return problem
        channel = call.args["channel"]
        if self._rate_limited(channel):
            return self._error(call, "ratelimited", 429)
        blocks, problem = self._blocks(call)
        if problem is not None:
            return problem
        metadata = call.args.get("metadata")
        if isinstance(metadata, str):
            metadata = json.loads(metadata)
        if metadata is not None and not (
            isinstance(metadata.get("event_type"), str)
            and isinstance(metadata.get("event_payload"), dict)
        ):
            return self._error(call, "invalid_metadata_format")
        message = Message(
            channel=channel,
            ts=self._next_ts(),
            text=str(call.args.get("text") or ""),
            blocks=blocks,
            thread_ts=call.args.get("thread_ts") or None,
            metadata=metadata,
        )
        self.messages[channel].append(message)
        if self.post_delay:
            await asyncio.sleep(self.post_delay)
        return web.json_response(
            {"ok": True, "channel": channel, "ts": message.ts, "message": message.as_api(False)}
        )

    async def _update(self, call: Call) -> web.Response:
        problem = self._channel_problem(call)
        if problem is not None:
            return problem
        message = self.find(call.args["channel"], str(call.args.get("ts")))
        if message is None:
            return self._error(call, "message_not_found")
        blocks, problem = self._blocks(call)
        if problem is not None:
            return problem
        message.text = str(call.args.get("text") or "")
        message.blocks = blocks
        message.updates += 1
        return web.json_response({"ok": True, "channel": message.channel, "ts": message.ts})

    async def _permalink(self, call: Call) -> web.Response:
        channel, ts = call.args.get("channel"), str(call.args.get("message_ts", ""))
        if not channel or self.find(channel, ts) is None:
            return self._error(call, "message_not_found")
        link = f"https://fake.slack.test/archives/{channel}/p{ts.replace('.', '')}"
        return web.json_response({"ok": True, "channel": channel, "permalink": link})

    async def _ephemeral(self, call: Call) -> web.Response:
        return web.json_response({"ok": True, "message_ts": self._next_ts()})

    async def _views_open(self, call: Call) -> web.Response:
        if not call.args.get("trigger_id"):
            return self._error(call, "invalid_trigger_id")
        view = call.args.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        problems = check_blocks(view.get("blocks", []))
        if problems:
            return self._error(call, "invalid_blocks", errors=problems)
        self.views.append(view)
        return web.json_response({"ok": True, "view": {"id": f"V{len(self.views):08d}", **view}})

    def _page(self, call: Call, found: list[Message]) -> web.Response:
        with_metadata = str(call.args.get("include_all_metadata", "")).lower() in ("1", "true")
        limit = max(1, min(int(call.args.get("limit") or 100), 1000))
        start = int(call.args.get("cursor") or 0)
        page = found[start : start + limit]
        more = start + limit < len(found)
        return web.json_response(
            {
                "ok": True,
                "messages": [m.as_api(with_metadata) for m in page],
                "has_more": more,
                "response_metadata": {"next_cursor": str(start + limit) if more else ""},
            }
        )

    async def _history(self, call: Call) -> web.Response:
        problem = self._channel_problem(call)
        if problem is not None:
            return problem
        channel = call.args["channel"]
        roots = [m for m in self.messages.get(channel, []) if m.thread_ts in (None, m.ts)]
        return self._page(call, list(reversed(roots)))  # newest first, as Slack

    async def _replies(self, call: Call) -> web.Response:
        problem = self._channel_problem(call)
        if problem is not None:
            return problem
        return self._page(call, self.thread(call.args["channel"], str(call.args.get("ts"))))
