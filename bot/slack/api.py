"""The Slack Web API as Signoff uses it: one client, one HTTP session, no hidden retries.

Every call goes through ``SlackApi`` so that:

* one ``aiohttp.ClientSession`` (created in the running loop on first use, closed at shutdown)
  carries every request, instead of a new connection per call;
* the SDK's own retry handlers are off: a ``chat.postMessage`` retried inside the SDK after a
  connection reset could post twice, unseen. Retries belong to the outbox, which knows from
  its own records whether an earlier attempt may have posted (``bot.slack.sink``);
* no call reads a conversation (``conversations.history`` / ``replies``): Slack allows apps
  outside its Marketplace one such request a minute, so everything Signoff needs to know about
  its messages is in its own database;
* ``slack.apiBaseUrl`` points every call at Slack or at a local fake;
* each call carries the bot token of the workspace it is for (``Workspaces.token_for``): a
  ``channel`` may name its workspace (``T0123/C0456``, as ``slack:T0123/C0456`` addresses do);
  one without is the default workspace's. ``views.open`` takes the clicker's ``team``;
* the proxy is the one curl's ``NO_PROXY`` rules choose for each URL (``engine.domain.proxies``,
  the environment read once at start): slack_sdk reads ``HTTPS_PROXY`` itself and ignores
  ``NO_PROXY``, and the session's middleware overrides what it picked, for the Web API and for
  ``response_url`` posts alike.

Errors: ``SlackApiError`` (Slack answered ``ok: false``, including HTTP 429) and
``aiohttp.ClientError`` / ``TimeoutError`` (no answer) reach the caller unchanged; the sink maps
them to ``DeliveryError`` and the handlers to a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.slack.installs import Workspaces, split_target
from engine.assembly import http_session
from engine.config.channels import SlackConfig
from engine.domain.proxies import ProxySettings

log = logging.getLogger(__name__)

METADATA_EVENT = "signoff_outbox"  # message metadata event_type of every message we post
TIMEOUT_SECONDS = 10


def _answer(exc: SlackApiError) -> Mapping[str, Any]:
    """Slack's JSON answer inside ``exc``, or ``{}`` when there was none: a proxy or an outage
    in front of Slack answers 5xx with plain text or HTML, which the SDK keeps as a ``str``
    (or, for a body that claims to be JSON and is not, leaves the aiohttp response in place)."""
    data = getattr(exc.response, "data", exc.response)
    return data if isinstance(data, Mapping) else {}


def http_status(exc: SlackApiError) -> int | None:
    """The HTTP status of the answer behind ``exc`` (``None`` when unknown)."""
    response = exc.response
    status = getattr(response, "status_code", None) or getattr(response, "status", None)
    return status if isinstance(status, int) else None


def retry_after_seconds(exc: SlackApiError) -> float | None:
    """The ``Retry-After`` of a rate-limited answer (HTTP 429 or ``error: ratelimited``)."""
    if http_status(exc) != 429 and _answer(exc).get("error") != "ratelimited":
        return None
    headers: Mapping[str, Any] = getattr(exc.response, "headers", None) or {}
    raw = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if isinstance(raw, list):
        raw = raw[0] if raw else None
    try:
        return max(0.0, float(raw)) if raw is not None else 1.0
    except ValueError:
        return 1.0


def error_code(exc: SlackApiError) -> str:
    """Slack's ``error`` string (``channel_not_found``, ``invalid_blocks`` ...), or
    ``unknown_error`` when the answer was not Slack's JSON."""
    return str(_answer(exc).get("error") or "unknown_error")


async def _member(call: Awaitable[Any], not_found: str) -> dict[str, Any] | None:
    """The ``user`` a users.* call answers; None when Slack says ``not_found``."""
    try:
        response = await call
    except SlackApiError as exc:
        if error_code(exc) == not_found:
            return None
        raise
    user = response.get("user")
    return user if isinstance(user, dict) else None


class SlackApi:
    """The Web API calls Signoff makes, on one shared session."""

    def __init__(
        self,
        config: SlackConfig,
        proxies: ProxySettings | None = None,
        workspaces: Workspaces | None = None,
    ) -> None:
        self.config = config
        self.proxies = proxies or ProxySettings()
        self.workspaces = workspaces  # None: every call with ``slack.botToken``
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None

    async def _auth(self, target: str) -> tuple[dict[str, Any], str]:
        """(the ``token`` argument for the workspace of ``target``, its channel id). Raises
        ``NotInstalled`` (a ``SlackApiError``) when no workspace's token applies."""
        named, channel = split_target(target)
        return await self.auth_for(named), channel

    def member(self, team: str | None, user_id: str) -> str:
        """How Signoff names Slack user ``user_id`` of workspace ``team``: ``T0123/U0456`` when
        installed through OAuth (several workspaces may be), else the bare ``U0456``."""
        return f"{team}/{user_id}" if team and self.workspaces is not None else user_id

    async def auth_for(self, team: str | None) -> dict[str, Any]:
        """The ``token`` argument of a Web API call made in workspace ``team`` (None: the
        default one), for ``self.client``'s methods: ``{}`` with ``slack.botToken``, whose
        client carries it already. Raises ``NotInstalled`` (a ``SlackApiError``)."""
        if self.workspaces is None:
            return {}
        return {"token": await self.workspaces.token_for(team)}

    @property
    def session(self) -> aiohttp.ClientSession:
        """The shared HTTP session, made on first use inside the running loop."""
        if self._session is None:
            self._session = http_session(self.proxies, timeout_seconds=TIMEOUT_SECONDS)
        return self._session

    @property
    def client(self) -> AsyncWebClient:
        if self._client is None:
            self._client = AsyncWebClient(
                token=self.config.bot_token,
                base_url=self.config.api_base_url,
                session=self.session,
                timeout=TIMEOUT_SECONDS,
                retry_handlers=[],
            )
        return self._client

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = None
        self._client = None

    # -- messages ------------------------------------------------------------------------------

    async def post(
        self,
        channel: str,
        message: Mapping[str, Any],
        *,
        thread_ts: str | None,
        dedupe_key: str,
    ) -> str:
        """``chat.postMessage`` with our dedupe key in the message metadata; returns its ts."""
        auth, channel = await self._auth(channel)
        response = await self.client.chat_postMessage(
            **auth,
            channel=channel,
            text=message["text"],
            blocks=message.get("blocks"),
            thread_ts=thread_ts,
            unfurl_links=False,
            unfurl_media=False,
            metadata={"event_type": METADATA_EVENT, "event_payload": {"dedupe": dedupe_key}},
        )
        return str(response["ts"])

    async def update(self, channel: str, ts: str, message: Mapping[str, Any]) -> None:
        """``chat.update`` of a message we posted (Slack allows only the poster's token)."""
        auth, channel = await self._auth(channel)
        await self.client.chat_update(
            **auth, channel=channel, ts=ts, text=message["text"], blocks=message.get("blocks")
        )

    async def open_dm(self, user_id: str, *, team: str | None = None) -> str:
        """The channel id of the bot's direct message with ``user_id`` of workspace ``team``
        (``conversations.open``, scope ``im:write``; Slack answers the same IM each time)."""
        auth = await self.auth_for(team)
        response = await self.client.conversations_open(**auth, users=user_id)
        return str((response.get("channel") or {})["id"])

    async def tell(self, channel: str, user_id: str, text: str) -> None:
        """An ephemeral message to ``user_id`` in ``channel`` (``chat.postEphemeral``): only
        they see it, and only while they are a member there."""
        auth, channel = await self._auth(channel)
        await self.client.chat_postEphemeral(**auth, channel=channel, user=user_id, text=text)

    async def permalink(self, channel: str, ts: str) -> str | None:
        try:
            auth, channel = await self._auth(channel)
            response = await self.client.chat_getPermalink(**auth, channel=channel, message_ts=ts)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("chat.getPermalink %s %s failed: %s", channel, ts, exc)
            return None
        link = response.get("permalink")
        return str(link) if link else None

    async def open_view(
        self, trigger_id: str, view: Mapping[str, Any], *, team: str | None = None
    ) -> None:
        """``views.open`` in the clicker's workspace ``team`` (None: the default one)."""
        auth = await self.auth_for(team)
        await self.client.views_open(**auth, trigger_id=trigger_id, view=dict(view))

    async def publish_home(self, user: str, view: Mapping[str, Any]) -> None:
        """``views.publish``: ``view`` becomes the Home tab of ``user`` (``U0123``, or
        ``T0123/U0123`` for a member of workspace T0123)."""
        auth, user_id = await self._auth(user)
        await self.client.views_publish(**auth, user_id=user_id, view=dict(view))

    async def user_by_email(self, email: str) -> dict[str, Any] | None:
        """``users.lookupByEmail`` in the default workspace: the member with that address;
        None when nobody has it."""
        auth = await self.auth_for(None)
        found = self.client.users_lookupByEmail(**auth, email=email)
        return await _member(found, "users_not_found")

    async def user_info(self, user: str) -> dict[str, Any] | None:
        """``users.info`` of ``user`` (``U0123`` or ``T0123/U0123``; its ``profile.email``
        needs ``users:read.email``); None: no such user."""
        auth, user_id = await self._auth(user)
        return await _member(self.client.users_info(**auth, user=user_id), "user_not_found")

    async def respond(self, response_url: str, text: str, *, in_channel: bool = False) -> None:
        """Answer an interaction through its ``response_url`` (ephemeral unless ``in_channel``),
        leaving the original message alone."""
        webhook = AsyncWebhookClient(
            response_url, session=self.session, timeout=TIMEOUT_SECONDS, retry_handlers=[]
        )
        body = {
            "text": text,
            "response_type": "in_channel" if in_channel else "ephemeral",
            "replace_original": False,
        }
        try:
            result = await webhook.send_dict(body)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            # Slack (or whoever sent a response_url) is unreachable: the decision stands, only
            # this courtesy message is lost.
            log.warning("response_url %s unreachable: %s", response_url[:100], exc)
            return
        if result.status_code >= 300:
            log.warning("response_url answered %s: %s", result.status_code, result.body)
