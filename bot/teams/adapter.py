"""The Bot Framework boundary: with ``bot.teams.proxied``, the ONLY module that imports
``botbuilder`` / ``botframework``.

The Bot Framework SDK is archived upstream (its successor is the Microsoft 365 Agents SDK), so
everything else in ``bot/teams/`` talks to this module through plain dataclasses and dicts:
the plain dataclasses of ``bot.teams.activities``. Switching SDKs means rewriting this file
alone.

Three SDK defects are worked around here, each where it bites:

* ``CloudAdapter.process()`` crashes on every invoke response in 4.17.0/4.17.1 (``'dict'
  object has no attribute 'is_xml_model'``: HTTP 500 on each ``adaptiveCard/action``). The
  aiohttp handler is ours (``bot/teams/__init__.py``) and calls ``process_activity`` with the
  auth first, the deserialized activity second and the turn logic third.
* Every turn builds a fresh ``ConnectorClient`` and token client, each owning an aiohttp
  session the SDK never closes; ``_closing`` closes them when the turn ends. Building them
  costs msrest a quadratic list scan, made linear below.
* The SDK fetches its OpenID metadata with blocking ``requests`` calls from inside the event
  loop, without a timeout, and for an emulator's or a skill's token from documents nobody
  configured. ``process`` checks the token with ``bot.teams.tokens`` first (the configured
  issuer only), and the SDK's metadata cache for the configured document is that module's
  ``SigningKeys``: fetched once, asynchronously, with a short timeout.
* msrest (the Bot Connector) and msal (the login) use ``requests``, whose ``NO_PROXY`` rules are
  not curl's: ``bot.teams.proxied`` gives each connector client and login the proxy
  ``engine.domain.proxies`` chooses for its URL, the environment otherwise unread.
* The SDK matches a token's ``serviceurl`` claim with the activity only when the activity
  names a serviceUrl, and fails with a 500 on a body that does not deserialize or names no
  conversation; ``process`` refuses all of those as ``BadActivity`` (HTTP 400) first.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import SimpleNamespace
from typing import Any

from azure.core.exceptions import DeserializationError
from botbuilder.core import BotAdapter, InvokeResponse, TurnContext
from botbuilder.core.cloud_adapter_base import CloudAdapterBase
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import Activity, ActivityTypes, Attachment, ConversationReference, Mention
from botframework.connector.auth import AuthenticationConstants
from botframework.connector.auth.jwt_token_extractor import JwtTokenExtractor
from botframework.connector.auth.skill_validation import SkillValidation
from msrest.exceptions import ClientRequestError, HttpOperationError
from msrest.universal_http.requests import ClientRetryPolicy

from bot.teams.activities import (
    ADAPTIVE_CARD,
    BadActivity,
    ConnectorFailure,
    ForeignTenant,
    Incoming,
    InvokeReply,
    Outgoing,
    Pace,
    TurnHandler,
    TurnReply,
    base_conversation_id,
    stated_tenants,
    tenant_refusal,
    thread_conversation_id,
    thread_root,
)
from bot.teams.proxied import ProxiedAuthentication
from bot.teams.tokens import FETCH_TIMEOUT, NotAuthenticated, SigningKeys, TokenGate
from engine.config.channels import TeamsConfig
from engine.domain.proxies import ProxySettings

log = logging.getLogger(__name__)

# msrest builds a retry policy for every client, testing each of 999 status codes against this
# 500-item *list*: about 6 ms of CPU per client, and the SDK makes two clients per turn. As a
# set the same test costs microseconds (nothing else reads it; msrest 0.7.1).
ClientRetryPolicy.safe_codes = frozenset(ClientRetryPolicy.safe_codes)  # type: ignore[assignment]


def _auth_settings(config: TeamsConfig) -> SimpleNamespace:
    """The configuration object ``ConfigurationBotFrameworkAuthentication`` reads by attribute
    name. The issuer/metadata overrides exist for tests (a local OpenID document) and sovereign
    clouds; with either set, the SDK takes its "parameterized" path, which then needs every
    endpoint spelled out, so the public-cloud values fill the rest."""
    # Single-tenant credentials need an app id (the SDK raises without one); with
    # insecureLocalDev there is none, and teams.tenantId only filters incoming activities.
    single_tenant = bool(config.app_id and config.tenant_id)
    settings = SimpleNamespace(
        APP_ID=config.app_id,
        APP_PASSWORD=config.app_password,
        APP_TYPE="SingleTenant" if single_tenant else "MultiTenant",
        APP_TENANTID=config.tenant_id if single_tenant else None,
    )
    if config.open_id_metadata_url or config.token_issuer:
        c = AuthenticationConstants
        settings.TO_BOT_FROM_CHANNEL_OPENID_METADATA_URL = (
            config.open_id_metadata_url or c.TO_BOT_FROM_CHANNEL_OPENID_METADATA_URL
        )
        settings.TO_BOT_FROM_CHANNEL_TOKEN_ISSUER = (
            config.token_issuer or c.TO_BOT_FROM_CHANNEL_TOKEN_ISSUER
        )
        settings.TO_BOT_FROM_EMULATOR_OPENID_METADATA_URL = (
            c.TO_BOT_FROM_EMULATOR_OPENID_METADATA_URL
        )
        settings.TO_CHANNEL_FROM_BOT_LOGIN_URL = c.TO_CHANNEL_FROM_BOT_LOGIN_URL
        settings.TO_CHANNEL_FROM_BOT_OAUTH_SCOPE = c.TO_CHANNEL_FROM_BOT_OAUTH_SCOPE
        settings.OAUTH_URL = c.OAUTH_URL
    return settings


class TeamsAdapter:
    """One ``CloudAdapter`` for the process: incoming turns, proactive sends and updates."""

    def __init__(
        self,
        config: TeamsConfig,
        *,
        pace: Pace | None = None,
        fetch_timeout: float = FETCH_TIMEOUT,
        proxies: ProxySettings | None = None,
    ) -> None:
        """``pace(conversation_id)`` is entered around every call to the Bot Connector
        (proactive sends and updates), so one rate limiter sees them all;
        ``fetch_timeout`` bounds each fetch of the signing keys."""
        self.app_id = config.app_id
        self.tenant_id = config.tenant_id
        self._pace = pace
        self.authenticated = config.authenticated
        metadata_url = (
            config.open_id_metadata_url
            or AuthenticationConstants.TO_BOT_FROM_CHANNEL_OPENID_METADATA_URL
        )
        proxies = proxies or ProxySettings()
        self.keys = SigningKeys(metadata_url, timeout=fetch_timeout, proxies=proxies)
        issuer = config.token_issuer or AuthenticationConstants.TO_BOT_FROM_CHANNEL_TOKEN_ISSUER
        self._gate = TokenGate(config.app_id, issuer, self.keys)
        if self.authenticated:
            # The SDK looks its metadata up in this class-wide cache by URL; with ours there,
            # its own validation uses the keys fetched here and never fetches them itself.
            JwtTokenExtractor.metadataCache[metadata_url] = self.keys
        self._auth = ProxiedAuthentication(_auth_settings(config), proxies)
        self._adapter = CloudAdapter(self._auth)

    async def authenticate(self, auth_header: str) -> None:
        """Check the Authorization header alone, before the body is read: ``NotAuthenticated``
        unless it carries a valid token from the configured issuer for this app id (the
        ``insecureLocalDev`` switch, without an app id, checks nothing)."""
        if not self.authenticated:
            return
        await self._gate.check(auth_header)
        try:
            skill = SkillValidation.is_skill_token(auth_header)
        except Exception as exc:  # PyJWT errors on what the gate already decoded: unlikely
            raise NotAuthenticated(f"{type(exc).__name__}: {exc}") from exc
        if skill:
            # The SDK would validate it against the emulator's metadata; no skills here.
            raise NotAuthenticated("a skill token; Signoff calls no skills")

    # -- incoming ------------------------------------------------------------------------------

    async def process(
        self, auth_header: str, body: Any, handler: TurnHandler
    ) -> InvokeReply | None:
        """Authenticate and run one turn; returns the invoke response, if the turn made one.
        ``authenticate(auth_header)`` has passed before the body was parsed; here the SDK
        checks the token again, against the activity (serviceUrl, channel endorsement).

        Authentication runs first and alone, so that a bad token is ``NotAuthenticated``
        (HTTP 401) and never confused with a failure inside the turn (HTTP 500); its result
        goes to ``process_activity`` in the auth argument's place. With ``teams.tenantId``
        set, an activity (or token) from another tenant is then ``ForeignTenant``."""
        if not isinstance(body, dict):
            raise BadActivity("the body is not a JSON object")
        try:
            activity = Activity().deserialize(body)
        except DeserializationError as exc:  # e.g. "conversation": "x", "timestamp": 5
            raise BadActivity("the body is not an activity") from exc
        if not activity.type:
            raise BadActivity("the activity has no type")
        if activity.conversation is None or not activity.conversation.id:
            # Nothing could be answered or remembered: every reply and reference needs it.
            raise BadActivity("the activity names no conversation")
        if not activity.service_url:
            # Without one the SDK skips matching the token's serviceurl claim (botframework
            # jwt_token_validation: "if service_url:"), so a token issued for any other
            # serviceUrl would pass; and there would be nowhere to reply.
            raise BadActivity("the activity has no serviceUrl")
        try:
            auth = await self._auth.authenticate_request(activity, auth_header)
        except Exception as exc:  # PermissionError, PyJWT errors, a key id not in the JWKS...
            raise NotAuthenticated(f"{type(exc).__name__}: {exc}") from exc
        claims = auth.claims_identity.claims if auth.claims_identity is not None else None
        why = tenant_refusal(self.tenant_id, stated_tenants(body, claims or {}))
        if why is not None:
            raise ForeignTenant(why)

        async def on_turn(context: TurnContext) -> None:
            async with _closing(context):
                reply = await handler(_incoming(context.activity))
                if reply.invoke is not None:
                    # What send_activity does with an invokeResponse activity, minus its deep
                    # copy of the whole card (a millisecond per click).
                    response = InvokeResponse(status=reply.invoke.status, body=reply.invoke.body)
                    context.turn_state[BotAdapter._INVOKE_RESPONSE_KEY] = Activity(
                        type=ActivityTypes.invoke_response, value=response
                    )

        result = await self._adapter.process_activity(auth, activity, on_turn)
        if result is None:
            return None
        return InvokeReply(int(result.status), result.body or {})

    # -- outgoing ------------------------------------------------------------------------------

    async def send(
        self, reference: dict[str, Any], message: Outgoing, *, thread: str | None = None
    ) -> str:
        """Post ``message`` into the referenced conversation (into the thread whose root
        activity id is ``thread``, in a channel); returns the new activity's id."""
        sent: list[str] = []

        async def callback(context: TurnContext) -> None:
            async with _closing(context):
                activity = _addressed(context, message)
                response = await _connector(context).conversations.send_to_conversation(
                    activity.conversation.id, activity
                )
                sent.append(response.id if response is not None and response.id else "")

        await self._proactive(reference, thread, callback)
        if not sent or not sent[0]:
            raise ConnectorFailure("the connector returned no activity id", status=None)
        return sent[0]

    async def update(
        self,
        reference: dict[str, Any],
        activity_id: str,
        message: Outgoing,
        *,
        thread: str | None = None,
    ) -> None:
        """Replace a message we sent (an approval card) for everyone in the conversation."""

        async def callback(context: TurnContext) -> None:
            async with _closing(context):
                activity = _addressed(context, message)
                activity.id = activity_id
                await _connector(context).conversations.update_activity(
                    activity.conversation.id, activity_id, activity
                )

        await self._proactive(reference, thread, callback)

    async def _proactive(
        self,
        reference: dict[str, Any],
        thread: str | None,
        callback: Callable[[TurnContext], Awaitable[None]],
    ) -> None:
        ref = ConversationReference().deserialize(reference)
        ref.activity_id = None  # a new top-level post, not a reply to the last incoming message
        paced = self._paced(base_conversation_id(ref.conversation.id))
        if thread:
            ref.conversation.id = thread_conversation_id(ref.conversation.id, thread)
        try:
            async with paced:
                await self._adapter.continue_conversation(ref, callback, self.app_id)
        except HttpOperationError as exc:
            raise _failure(exc) from exc
        except (TimeoutError, ClientRequestError, OSError) as exc:
            raise ConnectorFailure(f"{type(exc).__name__}: {exc}") from exc

    def _paced(self, conversation_id: str) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext() if self._pace is None else self._pace(conversation_id)


def _connector(context: TurnContext) -> Any:
    return context.turn_state[CloudAdapterBase.BOT_CONNECTOR_CLIENT_KEY]


def _addressed(context: TurnContext, message: Outgoing) -> Activity:
    """``message`` addressed to the turn's conversation as a top-level post. Proactive turns
    go to the connector directly: ``TurnContext.send_activity`` would make every proactive
    message a reply to the continuation event's made-up id."""
    reference = TurnContext.get_conversation_reference(context.activity)
    activity = TurnContext.apply_conversation_reference(_activity(message), reference)
    activity.reply_to_id = None
    return activity


@contextlib.asynccontextmanager
async def _closing(context: TurnContext) -> Any:
    """Close the per-turn clients the SDK leaves open (each holds an aiohttp session)."""
    try:
        yield
    finally:
        connector = context.turn_state.get(CloudAdapterBase.BOT_CONNECTOR_CLIENT_KEY)
        tokens = context.turn_state.get(CloudAdapterBase.USER_TOKEN_CLIENT_KEY)
        for client in (connector, getattr(tokens, "_client", None)):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.__aexit__(None, None, None)


def _incoming(activity: Activity) -> Incoming:
    sender = activity.from_property
    conversation = activity.conversation
    recipient_id = activity.recipient.id if activity.recipient else None
    added = [m.id for m in activity.members_added or [] if m is not None]  # JSON nulls stay
    bot_added = (activity.type == ActivityTypes.conversation_update and recipient_id in added) or (
        activity.type == ActivityTypes.installation_update
        and (activity.action or "add").startswith("add")
    )
    text = activity.text or ""
    if activity.type == ActivityTypes.message and activity.recipient is not None:
        text = _without_own_mention(activity) or text
    reference = TurnContext.get_conversation_reference(activity)
    reference.activity_id = None
    if reference.conversation is not None and reference.conversation.id:
        reference.conversation.id = base_conversation_id(reference.conversation.id)
    return Incoming(
        type=activity.type or "",
        name=activity.name,
        text=text,
        value=activity.value,
        conversation_id=base_conversation_id(conversation.id if conversation else ""),
        thread=thread_root(conversation.id if conversation else ""),
        sender_aad=sender.aad_object_id if sender else None,
        bot_added=bot_added,
        personal=bool(conversation and conversation.conversation_type == "personal"),
        activity_id=activity.id,
        reference=reference.serialize(),
    )


def _without_own_mention(activity: Activity) -> str | None:
    """The text without the bot's own @mention. The SDK reads every entity as a well-formed
    mention: ``null``, ``{}`` or a mention without ``mentioned`` raises; such a message keeps
    its text, and ``handlers.command_text`` drops any ``<at>`` tags left."""
    try:
        return TurnContext.remove_recipient_mention(activity)  # type: ignore[no-any-return]
    except (AttributeError, KeyError, TypeError):
        text: str | None = activity.text
        return text


def _activity(message: Outgoing) -> Activity:
    activity = Activity(type=ActivityTypes.message, text=message.text)
    if message.card is not None:
        activity.attachments = [Attachment(content_type=ADAPTIVE_CARD, content=message.card)]
    if message.mentions:
        activity.entities = [
            Mention(mentioned=m["mentioned"], text=m["text"], type="mention")
            for m in message.mentions
        ]
    return activity


def _failure(exc: HttpOperationError) -> ConnectorFailure:
    response = exc.response
    status = getattr(response, "status_code", None) or getattr(response, "status", None)
    headers = getattr(response, "headers", None) or {}
    return ConnectorFailure(
        f"the Bot Connector answered HTTP {status}: {exc}",
        status=int(status) if status is not None else None,
        retry_after=_retry_after(headers.get("Retry-After")),
    )


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds (the Bot Connector sends a number)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


# The boundary's whole vocabulary, the plain types of ``bot.teams.activities`` included.
__all__ = [
    "ADAPTIVE_CARD",
    "BadActivity",
    "ConnectorFailure",
    "ForeignTenant",
    "Incoming",
    "InvokeReply",
    "NotAuthenticated",
    "Outgoing",
    "TeamsAdapter",
    "TurnReply",
    "base_conversation_id",
    "thread_conversation_id",
    "thread_root",
]
