"""A fake Slack Web API: real aiohttp on 127.0.0.1, port 0, recording what it receives.

It answers the methods Signoff calls (``chat.postMessage``, ``chat.update``,
``chat.getPermalink``, ``conversations.open``, ``views.open``, ``chat.postEphemeral``,
``auth.test``, ``views.publish``, ``users.lookupByEmail``, ``users.info``) the way Slack does,
and refuses what Slack refuses:

* a wrong bearer token: ``invalid_auth``;
* Block Kit over the limits (``cards.slack.limits.check_blocks``): ``invalid_blocks``; a message
  ``text`` over 40,000 characters: ``msg_too_long``;
* a view over Slack's view limits (title/submit/close text 24 characters, 100 blocks, input
  label 2000, ``plain_text_input`` ``min_length``/``max_length`` 3000, placeholder 150,
  ``private_metadata`` 3000, ``callback_id`` 255): HTTP 200 ``invalid_arguments`` with
  ``response_metadata.messages`` naming each problem by JSON pointer, as Slack answers;
* a Home tab (``views.publish``) that is not ``type: home``, over 100 blocks, with a block
  over its own limits or ``private_metadata`` over 3000: ``invalid_arguments`` as above; for a
  user not in the fake's directory (``add_user``): ``user_not_found``;
* ``users.lookupByEmail`` of an address nobody in the directory has: ``users_not_found``;
  ``users.info`` of an unknown id: ``user_not_found``;
* more calls of a method in 60 s than its rate tier allows (``TIER_OF``: Tier 1 1/min, Tier 2
  20/min, Tier 3 50/min, Tier 4 100/min, per method, as Slack counts per app and workspace):
  HTTP 429 ``ratelimited`` with ``Retry-After`` the seconds until the oldest call leaves the
  minute (https://docs.slack.dev/apis/web-api/rate-limits). A test that floods on purpose may
  raise a method's limit through ``tier_limits``;
* a ``trigger_id`` this fake did not issue (``trigger()``): ``invalid_trigger_id``; one used
  before: ``exchanged_trigger_id``; one older than 3 s on the fake's clock (loop time plus
  ``advance()``, so tests need no sleeps): ``expired_trigger_id``;
* a method told to ``answer_next(method, status, body)``: that raw answer once (an HTTP 5xx
  with an HTML or plain-text body, as a load balancer in front of Slack sends one);
* a ``response_url`` answer without text or blocks: HTTP 400 ``no_text``; one that is used
  more than 5 times: HTTP 404 ``used_url``;
* a channel in ``missing_channels``: ``channel_not_found``; ``chat.update`` of an unknown
  message: ``message_not_found``; a direct message (``D…``) that ``conversations.open`` did
  not open: ``channel_not_found``; ``conversations.open`` of a user id that is not one
  (``U…``/``W…``): ``user_not_found``; ``chat.postEphemeral`` to a user not in
  the channel: ``user_not_in_channel`` (a DM's members are its user, and the bot);
* ``conversations.history`` / ``conversations.replies``: one call a minute (Slack's limit for
  apps outside its Marketplace, since 2025-05-29), then HTTP 429 with ``Retry-After``; Signoff
  must never call them (tests assert on ``calls_of``), so they answer no messages;
* more than ``rate`` ``chat.postMessage`` calls in ``window`` seconds (one, as Slack counts)
  into one channel: HTTP 429 with
  ``Retry-After: <retry_after>``; until that time has passed, every call into that channel is
  refused again and counted in ``violations`` (a client that did not wait).

Messages are kept per channel with their metadata. Interaction responses (``response_url``)
are served at ``/response/<id>`` and recorded in ``responses``; ephemeral messages in
``ephemerals``.

Workspaces and OAuth installs (``bot/slack/oauth.py``). ``token`` is the bot token of workspace
``team``; ``app(client_id, client_secret)`` registers an app, ``approve(team, ...)`` is a person
clicking "Allow" on Slack's authorize page (it returns the code Slack sends back), and
``oauth.v2.access`` exchanges it as Slack does: the client id and secret by HTTP Basic auth
(a wrong one: ``invalid_client_id`` / ``bad_client_secret``), a code this fake did not issue or
one used before: ``invalid_code``, one older than 10 minutes on the fake's clock:
``code_expired``, a ``redirect_uri`` unlike the authorize step's: ``bad_redirect_uri``. Each
exchange issues a new bot token for that workspace. ``uninstall(team)`` revokes its tokens
(``token_revoked`` from then on). A channel belongs to one workspace (``add_channel``): another
workspace's token gets ``channel_not_found`` there, and ``chat.update`` of a message another
workspace's bot posted gets ``cant_update_message``. Every call records the bearer token it
carried (``Call.token``).

    async with FakeSlack(rate=50) as slack:
        # slack: {botToken: <slack.token>, signingSecret: ..., apiBaseUrl: <slack.api_url>}
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import itertools
import json
import math
import re
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from cards.slack.limits import SLACK_MAX_MESSAGE_TEXT, check_blocks

# Slack's limits for views (https://docs.slack.dev/reference/views,
# .../block-kit/blocks/input-block, .../block-kit/block-elements/plain-text-input-element).
VIEW_MAX_TITLE = 24  # title, submit and close text
VIEW_MAX_BLOCKS = 100
VIEW_MAX_LABEL = 2000
VIEW_MAX_INPUT_LENGTH = 3000  # plain_text_input min_length / max_length
VIEW_MAX_PLACEHOLDER = 150
VIEW_MAX_METADATA = 3000
VIEW_MAX_CALLBACK_ID = 255
TRIGGER_SECONDS = 3.0  # a trigger_id is good for 3 s, and once
HISTORY_WINDOW = 60.0  # conversations.history / replies: 1 request a minute (non-Marketplace)
CODE_SECONDS = 600.0  # an OAuth code is good for 10 minutes, and once
RESPONSE_URL_USES = 5  # a response_url takes 5 answers (in 30 minutes)
# Slack's rate tiers (https://docs.slack.dev/apis/web-api/rate-limits), calls per minute, and
# the tier of each method the fake enforces one for (each method's reference page names it).
TIERS = {1: 1, 2: 20, 3: 50, 4: 100}
TIER_OF = {
    "views.publish": 4,
    "views.open": 4,
    "users.lookupByEmail": 3,
    "users.info": 4,
    "conversations.open": 3,
    "chat.update": 3,
}
TIER_WINDOW = 60.0


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[Any] | None
    thread_ts: str | None
    metadata: dict[str, Any] | None
    updates: int = 0
    team: str | None = None  # the workspace of the bot that posted it

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
    token: str | None = None  # the bearer token it carried


@dataclass
class Grant:
    """A code Slack sent back to the redirect URL after someone allowed the install."""

    client_id: str
    team: str
    team_name: str
    user: str
    scopes: tuple[str, ...]
    redirect_uri: str | None
    issued: float  # the fake's clock


@dataclass
class Response:
    """A POST to a ``response_url``."""

    key: str
    body: dict[str, Any]


@dataclass
class FakeSlack:
    token: str = "xoxb-fake-token"
    team: str = "T0FAKE"  # the workspace of ``token``
    rate: int | None = None  # chat.postMessage per channel per window; None: no limit
    window: float = 1.0  # seconds; a test that must reach the limit on a slow machine widens it
    retry_after: int = 1  # seconds, as Slack sends them
    post_delay: float = 0.0  # seconds before answering chat.postMessage (after recording it)
    hold_posts: asyncio.Event | None = None  # when set: chat.postMessage answers once it is set
    missing_channels: set[str] = field(default_factory=set)
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, list[Message]] = field(default_factory=lambda: defaultdict(list))
    responses: list[Response] = field(default_factory=list)
    views: list[dict[str, Any]] = field(default_factory=list)
    ephemerals: list[tuple[str, str, str]] = field(default_factory=list)  # channel, user, text
    ims: dict[str, str] = field(default_factory=dict)  # user id -> DM channel id (opened)
    violations: list[tuple[str, float, float]] = field(default_factory=list)
    rate_limited: int = 0
    port: int = 0
    refused: list[tuple[str, str, list[str]]] = field(default_factory=list)  # method, error, why
    # calls per minute by method; a test that floods a method on purpose raises its entry
    tier_limits: dict[str, int] = field(
        default_factory=lambda: {m: TIERS[tier] for m, tier in TIER_OF.items()}
    )
    users: dict[str, dict[str, Any]] = field(default_factory=dict)  # the workspace's directory
    homes: dict[str, dict[str, Any]] = field(default_factory=dict)  # user id -> Home tab view

    def __post_init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self._sent: dict[str, deque[float]] = defaultdict(deque)
        self._blocked_until: dict[str, float] = {}
        self._ts = itertools.count(1)
        self._ts_base = int(time.time())
        self._scripted: dict[str, deque[tuple[int, str]]] = defaultdict(deque)
        self._raw: dict[str, deque[tuple[int, str, str]]] = defaultdict(deque)
        self._offset = 0.0  # seconds the fake's clock is ahead of the loop's (``advance``)
        self._triggers: dict[str, float] = {}  # trigger_id -> when issued (fake clock)
        self._exchanged: set[str] = set()
        self._response_uses: Counter[str] = Counter()
        self._history_at: dict[str, float] = {}  # method -> when last answered (fake clock)
        self._tier_calls: dict[str, deque[float]] = defaultdict(deque)  # method -> fake times
        self.tokens: dict[str, str] = {self.token: self.team}  # bot token -> its workspace
        self.revoked: set[str] = set()
        self.channel_teams: dict[str, str] = {}  # channel -> workspace, where one was set
        self.apps: dict[str, str] = {}  # client id -> client secret
        self.grants: dict[str, Grant] = {}  # code -> what it grants
        self._used_codes: set[str] = set()

    # -- setup ---------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def response_url(self, key: object) -> str:
        return f"{self.url}/response/{key}"

    def now(self) -> float:
        """The fake's clock: the loop's time plus what ``advance`` added."""
        return asyncio.get_running_loop().time() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the fake's clock on (a trigger_id then expires without a test sleeping)."""
        self._offset += seconds

    def trigger(self) -> str:
        """A new ``trigger_id`` as Slack puts in an interaction payload, issued now."""
        n = len(self._triggers) + 1
        trigger_id = f"{self._ts_base}.{n:07d}.{n * 2654435761 % 2**32:08x}"
        self._triggers[trigger_id] = self.now()
        return trigger_id

    def add_user(
        self, user_id: str, email: str | None = None, *, confirmed: bool = True
    ) -> dict[str, Any]:
        """A member of the workspace, as ``users.info`` describes them."""
        profile: dict[str, Any] = {"real_name": user_id.lower()}
        if email is not None:
            profile["email"] = email
        user = {
            "id": user_id,
            "team_id": "T0FAKE",
            "name": user_id.lower(),
            "deleted": False,
            "is_bot": False,
            "is_email_confirmed": confirmed,
            "profile": profile,
        }
        self.users[user_id] = user
        return user

    def add_channel(self, team: str, channel: str) -> None:
        """``channel`` is a channel of workspace ``team`` (other workspaces cannot see it)."""
        self.channel_teams[channel] = team

    def app(self, client_id: str, client_secret: str) -> None:
        self.apps[client_id] = client_secret

    def approve(
        self,
        client_id: str,
        team: str,
        *,
        team_name: str = "",
        user: str = "U0INSTALL",
        scopes: tuple[str, ...] = ("chat:write", "commands"),
        redirect_uri: str | None = None,
    ) -> str:
        """Someone of ``team`` clicked "Allow" on the authorize page: the code for the redirect."""
        code = f"{len(self.grants) + 1}.{team}.{int(self.now() * 1000)}"
        self.grants[code] = Grant(
            client_id, team, team_name or team, user, scopes, redirect_uri, self.now()
        )
        return code

    def uninstall(self, team: str) -> None:
        """Workspace ``team`` removed the app: every token of it is revoked."""
        self.revoked |= {t for t, owner in self.tokens.items() if owner == team}

    def fail_next(self, method: str, error: str, status: int = 200) -> None:
        """The next call of ``method`` answers ``{ok: false, error}`` with HTTP ``status``."""
        self._scripted[method].append((status, error))

    def answer_next(
        self, method: str, status: int, body: str, content_type: str = "text/plain"
    ) -> None:
        """The next call of ``method`` answers HTTP ``status`` with ``body`` as it is (not
        Slack's JSON): what a proxy or an outage in front of Slack answers."""
        self._raw[method].append((status, body, content_type))

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

    def dm(self, user_id: str) -> list[Message]:
        """What was posted into the direct message with ``user_id``."""
        channel = self.ims.get(user_id)
        return self.posted(channel) if channel else []

    def history_reads(self) -> list[Call]:
        """Every call that read a conversation: Signoff must make none."""
        return [
            c for c in self.calls if c.method in ("conversations.history", "conversations.replies")
        ]

    def find(self, channel: str, ts: str) -> Message | None:
        return next((m for m in self.messages.get(channel, []) if m.ts == ts), None)

    # -- the server ----------------------------------------------------------------------------

    async def _response(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        body = await request.json()
        self._response_uses[key] += 1
        if self._response_uses[key] > RESPONSE_URL_USES:
            self.refused.append(("response_url", "used_url", []))
            return web.Response(status=404, text="used_url")
        text, blocks = body.get("text"), body.get("blocks")
        if not text and not blocks:
            self.refused.append(("response_url", "no_text", []))
            return web.Response(status=400, text="no_text")
        problems = check_blocks(blocks) if blocks is not None else []
        if problems or (isinstance(text, str) and len(text) > SLACK_MAX_MESSAGE_TEXT):
            self.refused.append(("response_url", "invalid_blocks", problems))
            return web.Response(status=400, text="invalid_blocks")
        self.responses.append(Response(key, body))
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
        if method == "oauth.v2.access":  # authenticated by the app's client id and secret
            return await self._oauth_access(call, request.headers.get("Authorization", ""))
        auth = request.headers.get("Authorization", "")
        call.token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        if call.token in self.revoked:
            return self._error(call, "token_revoked")
        if call.token not in self.tokens:
            return self._error(call, "invalid_auth")
        if self._raw[method]:
            status, text, content_type = self._raw[method].popleft()
            call.status, call.error = status, f"HTTP {status}"
            self.refused.append((method, call.error, []))
            return web.Response(status=status, text=text, content_type=content_type)
        if self._scripted[method]:
            status, error = self._scripted[method].popleft()
            return self._error(call, error, status)
        wait = self._over_tier(method)
        if wait is not None:
            self.rate_limited += 1
            return self._error(call, "ratelimited", 429, retry_after=wait)
        handler = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.getPermalink": self._permalink,
            "chat.postEphemeral": self._ephemeral,
            "conversations.open": self._open,
            "conversations.history": self._history,
            "conversations.replies": self._history,
            "views.open": self._views_open,
            "views.publish": self._views_publish,
            "users.lookupByEmail": self._lookup_by_email,
            "users.info": self._users_info,
        }.get(method)
        if handler is None:
            return self._error(call, "unknown_method", 404)
        return await handler(call)

    def _over_tier(self, method: str) -> int | None:
        """Seconds to wait when ``method`` is over its tier this minute (fake clock), else None
        (and the call is counted)."""
        limit = self.tier_limits.get(method)
        if limit is None:
            return None
        now, sent = self.now(), self._tier_calls[method]
        while sent and sent[0] <= now - TIER_WINDOW:
            sent.popleft()
        if len(sent) >= limit:
            return max(1, math.ceil(sent[0] + TIER_WINDOW - now))
        sent.append(now)
        return None

    def _error(
        self,
        call: Call,
        error: str,
        status: int = 200,
        retry_after: int | None = None,
        **extra: Any,
    ) -> web.Response:
        call.status, call.error = status, error
        why = extra.get("errors") or (extra.get("response_metadata") or {}).get("messages") or []
        self.refused.append((call.method, error, list(why)))
        wait = retry_after if retry_after is not None else self.retry_after
        headers = {"Retry-After": str(wait)} if status == 429 else None
        return web.json_response(
            {"ok": False, "error": error, **extra}, status=status, headers=headers
        )

    async def _auth_test(self, call: Call) -> web.Response:
        team = self.tokens[str(call.token)]
        bot = "SIGNOFF" if team == self.team else team[1:]
        return web.json_response(
            {"ok": True, "team_id": team, "user_id": f"U0{bot}", "bot_id": f"B0{bot}"}
        )

    async def _oauth_access(self, call: Call, authorization: str) -> web.Response:
        """``oauth.v2.access`` (https://docs.slack.dev/reference/methods/oauth.v2.access)."""
        client_id, client_secret = call.args.get("client_id"), call.args.get("client_secret")
        if authorization.startswith("Basic "):
            try:
                decoded = base64.b64decode(authorization[6:]).decode()
            except (ValueError, UnicodeDecodeError):
                return self._error(call, "invalid_client_id")
            client_id, _, client_secret = decoded.partition(":")
        if client_id not in self.apps:
            return self._error(call, "invalid_client_id")
        if not hmac.compare_digest(str(client_secret or ""), self.apps[str(client_id)]):
            return self._error(call, "bad_client_secret")
        code = str(call.args.get("code") or "")
        grant = self.grants.get(code)
        if grant is None or code in self._used_codes or grant.client_id != client_id:
            return self._error(call, "invalid_code")
        self._used_codes.add(code)  # a code is good once, even when the exchange fails later
        if self.now() - grant.issued > CODE_SECONDS:
            return self._error(call, "code_expired")
        if grant.redirect_uri is not None and call.args.get("redirect_uri") != grant.redirect_uri:
            return self._error(call, "bad_redirect_uri")
        token = f"xoxb-{grant.team}-{len(self.tokens)}-{code.split('.')[0]}"
        self.tokens[token] = grant.team
        return web.json_response(
            {
                "ok": True,
                "access_token": token,
                "token_type": "bot",
                "scope": ",".join(grant.scopes),
                "bot_user_id": f"U0{grant.team[1:]}",
                "app_id": "A0SIGNOFF",
                "team": {"name": grant.team_name, "id": grant.team},
                "enterprise": None,
                "is_enterprise_install": False,
                "authed_user": {"id": grant.user},
            }
        )

    def _channel_problem(self, call: Call) -> web.Response | None:
        """Unknown channels (another workspace's too), and any call into a channel that was
        told to wait."""
        channel = call.args.get("channel")
        if not channel or channel in self.missing_channels:
            return self._error(call, "channel_not_found")
        if channel.startswith("D") and channel not in self.ims.values():
            return self._error(call, "channel_not_found")
        owner = self.channel_teams.get(channel)
        if owner is not None and owner != self.tokens.get(str(call.token)):
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
                messages = [f"[ERROR] {p}" for p in problems]
                return None, self._error(
                    call,
                    "invalid_blocks",
                    errors=problems,
                    response_metadata={"messages": messages},
                )
        if not call.args.get("text") and not blocks:
            return None, self._error(call, "no_text")
        if len(str(call.args.get("text") or "")) > SLACK_MAX_MESSAGE_TEXT:
            return None, self._error(call, "msg_too_long")
        return blocks, None

    def _rate_limited(self, channel: str) -> bool:
        now = asyncio.get_running_loop().time()
        window = self._sent[channel]
        while window and window[0] <= now - self.window:
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
            team=self.tokens.get(str(call.token)),
        )
        self.messages[channel].append(message)
        if self.post_delay:
            await asyncio.sleep(self.post_delay)  # Slack's latency, measured in real time
        if self.hold_posts is not None:
            await self.hold_posts.wait()
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
        if message.team != self.tokens.get(str(call.token)):  # only the poster may update it
            return self._error(call, "cant_update_message")
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
        problem = self._channel_problem(call)
        if problem is not None:
            return problem
        channel, user = str(call.args["channel"]), str(call.args.get("user") or "")
        if channel.startswith("D") and self.ims.get(user) != channel:
            return self._error(call, "user_not_in_channel")
        text = str(call.args.get("text") or "")
        if not text and not call.args.get("blocks"):
            return self._error(call, "no_text")
        self.ephemerals.append((channel, user, text))
        return web.json_response({"ok": True, "message_ts": self._next_ts()})

    async def _open(self, call: Call) -> web.Response:
        users = str(call.args.get("users") or "")
        if not re.fullmatch(r"[UW][A-Z0-9]{2,}", users):
            return self._error(call, "user_not_found")
        team = self.tokens.get(str(call.token), self.team)
        channel = self.ims.setdefault(users, f"D{len(self.ims) + 1:08d}")
        self.channel_teams.setdefault(channel, team)  # an IM is of the bot's workspace
        return web.json_response({"ok": True, "channel": {"id": channel}})

    async def _views_open(self, call: Call) -> web.Response:
        view = call.args.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        if not isinstance(view, dict):
            return self._invalid(call, ["[ERROR] must provide an object [json-pointer:/view]"])
        problems = view_problems(view)
        if problems:
            return self._invalid(call, problems)
        # Slack checks the view before it exchanges the trigger: a refused view leaves it unused.
        trigger_id = str(call.args.get("trigger_id") or "")
        issued = self._triggers.get(trigger_id)
        if issued is None:
            return self._error(call, "invalid_trigger_id")
        if trigger_id in self._exchanged:
            return self._error(call, "exchanged_trigger_id")
        if self.now() - issued > TRIGGER_SECONDS:
            return self._error(call, "expired_trigger_id")
        self._exchanged.add(trigger_id)
        self.views.append(view)
        return web.json_response({"ok": True, "view": {"id": f"V{len(self.views):08d}", **view}})

    async def _views_publish(self, call: Call) -> web.Response:
        view = call.args.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        if not isinstance(view, dict):
            return self._invalid(call, ["[ERROR] must provide an object [json-pointer:/view]"])
        problems = view_problems(view, kind="home")
        if problems:
            return self._invalid(call, problems)
        user_id = str(call.args.get("user_id") or "")
        if user_id not in self.users:
            return self._error(call, "user_not_found")
        self.homes[user_id] = view
        return web.json_response({"ok": True, "view": {"id": f"VH{user_id}", **view}})

    async def _lookup_by_email(self, call: Call) -> web.Response:
        email = str(call.args.get("email") or "").lower()
        for user in self.users.values():
            if email and str(user["profile"].get("email", "")).lower() == email:
                return web.json_response({"ok": True, "user": user})
        return self._error(call, "users_not_found")

    async def _users_info(self, call: Call) -> web.Response:
        user = self.users.get(str(call.args.get("user") or ""))
        if user is None:
            return self._error(call, "user_not_found")
        return web.json_response({"ok": True, "user": user})

    def _invalid(self, call: Call, messages: list[str]) -> web.Response:
        return self._error(call, "invalid_arguments", response_metadata={"messages": messages})

    async def _history(self, call: Call) -> web.Response:
        """Tier-1-like, as Slack limits apps outside its Marketplace: one call a minute."""
        last = self._history_at.get(call.method)
        if last is not None and self.now() - last < HISTORY_WINDOW:
            self.rate_limited += 1
            return self._error(call, "ratelimited", 429)
        self._history_at[call.method] = self.now()
        return web.json_response({"ok": True, "messages": [], "has_more": False})


def view_problems(view: dict[str, Any], kind: str = "modal") -> list[str]:
    """What Slack refuses in a view (a ``modal``, or a ``home`` tab, which has no title or
    buttons), as ``response_metadata.messages`` lines."""
    out: list[str] = []

    def fail(message: str, pointer: str) -> None:
        out.append(f"[ERROR] {message} [json-pointer:/view{pointer}]")

    def text(obj: object, limit: int, pointer: str, *, required: bool = False) -> None:
        if obj is None:
            if required:
                fail("missing required field: text", pointer)
            return
        value = obj.get("text") if isinstance(obj, dict) else None
        if (
            not isinstance(obj, dict)
            or obj.get("type") != "plain_text"
            or not isinstance(value, str)
        ):
            fail("must be a plain_text object", pointer)
        elif not value:
            fail("must be more than 0 characters", f"{pointer}/text")
        elif len(value) > limit:
            fail(f"must be less than {limit + 1} characters", f"{pointer}/text")

    if view.get("type") != kind:
        fail(f"must be {kind}", "/type")
    text(view.get("title"), VIEW_MAX_TITLE, "/title", required=kind == "modal")
    text(view.get("submit"), VIEW_MAX_TITLE, "/submit")
    text(view.get("close"), VIEW_MAX_TITLE, "/close")
    for key, limit in (
        ("private_metadata", VIEW_MAX_METADATA),
        ("callback_id", VIEW_MAX_CALLBACK_ID),
    ):
        value = view.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            fail(f"must be less than {limit + 1} characters", f"/{key}")
    blocks = view.get("blocks")
    if not isinstance(blocks, list):
        fail("must provide an array", "/blocks")
        return out
    if len(blocks) > VIEW_MAX_BLOCKS:
        fail(f"must contain at most {VIEW_MAX_BLOCKS} items", "/blocks")
    for i, block in enumerate(blocks):
        where = f"/blocks/{i}"
        if not isinstance(block, dict):
            fail("must provide an object", where)
            continue
        if block.get("type") != "input":
            out += [f"[ERROR] {p} [json-pointer:/view{where}]" for p in check_blocks([block])]
            continue
        text(block.get("label"), VIEW_MAX_LABEL, f"{where}/label", required=True)
        element = block.get("element")
        if not isinstance(element, dict):
            fail("missing required field: element", where)
            continue
        if element.get("type") == "plain_text_input":
            for key in ("min_length", "max_length"):
                value = element.get(key)
                if value is not None and (
                    not isinstance(value, int) or not 0 <= value <= VIEW_MAX_INPUT_LENGTH
                ):
                    fail(
                        f"must be less than or equal to {VIEW_MAX_INPUT_LENGTH}",
                        f"{where}/element/{key}",
                    )
        text(element.get("placeholder"), VIEW_MAX_PLACEHOLDER, f"{where}/element/placeholder")
    return out
