"""The Slack Web API as Signoff uses it: one client, one HTTP session, no hidden retries.

Every call goes through ``SlackApi`` so that:

* one ``aiohttp.ClientSession`` (created in the running loop on first use, closed at shutdown)
  carries every request, instead of a new connection per call;
* the SDK's own retry handlers are off: a ``chat.postMessage`` retried inside the SDK after a
  connection reset could post twice, unseen. Retries belong to the outbox, where a retried
  delivery first looks for its message (``find_posted``) before posting again;
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
from collections.abc import Mapping
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
HISTORY_PAGES = 5  # pages of 200 messages searched for an earlier attempt's message
PAGE_SIZE = 200
TIMEOUT_SECONDS = 10


def retry_after_seconds(exc: SlackApiError) -> float | None:
    """The ``Retry-After`` of a rate-limited answer (HTTP 429 or ``error: ratelimited``)."""
    response = exc.response
    status = getattr(response, "status_code", None)
    error = response.get("error") if hasattr(response, "get") else None
    if status != 429 and error != "ratelimited":
        return None
    headers: Mapping[str, Any] = getattr(response, "headers", None) or {}
    raw = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if isinstance(raw, list):
        raw = raw[0] if raw else None
    try:
        return max(0.0, float(raw)) if raw is not None else 1.0
    except ValueError:
        return 1.0


def error_code(exc: SlackApiError) -> str:
    """Slack's ``error`` string (``channel_not_found``, ``invalid_blocks`` ...)."""
    response = exc.response
    value = response.get("error") if hasattr(response, "get") else None
    return str(value or "unknown_error")


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

    async def find_posted(self, channel: str, thread_ts: str | None, dedupe_key: str) -> str | None:
        """The ts of a message an earlier attempt posted with ``dedupe_key``, if Slack has it:
        searched in the thread (``conversations.replies``) or, for a thread root, in the
        channel's recent history (``conversations.history``), with metadata included."""
        auth, channel = await self._auth(channel)
        cursor: str | None = None
        for _ in range(HISTORY_PAGES):
            args: dict[str, Any] = {
                **auth,
                "channel": channel,
                "include_all_metadata": True,
                "limit": PAGE_SIZE,
            }
            if cursor:
                args["cursor"] = cursor
            if thread_ts is not None:
                response = await self.client.conversations_replies(ts=thread_ts, **args)
            else:
                response = await self.client.conversations_history(**args)
            for message in response.get("messages") or []:
                metadata = message.get("metadata") or {}
                payload = metadata.get("event_payload") or {}
                if metadata.get("event_type") == METADATA_EVENT and payload.get("dedupe") == (
                    dedupe_key
                ):
                    return str(message["ts"])
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return None
        return None

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
