"""What ``bot/teams/`` exchanges with the Bot Framework boundary (``bot.teams.adapter``), in plain
dataclasses: ``Incoming`` (one activity as received), ``TurnReply`` (an invoke's answer),
``Outgoing`` (a message to send), ``ConnectorFailure`` (a send that failed, with the HTTP status
and any ``Retry-After``), ``tenant_refusal`` (the ``teams.tenantId`` rule), and the conversation
ids of channel threads. Nothing here imports the
SDK, so the handlers, the renderers and the sink never load it through these."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"
THREAD_SUFFIX = ";messageid="  # a channel post's conversation id: <channel>;messageid=<root>


@dataclass(frozen=True, slots=True)
class Incoming:
    """One activity as Teams sent it, reduced to what Signoff reads."""

    type: str  # message | invoke | conversationUpdate | installationUpdate | ...
    name: str | None  # invokes: "adaptiveCard/action"
    text: str  # messages: the text with the bot's own @mention removed
    value: Any  # invokes: {"action": {"type", "verb", "data"}, "trigger"}
    conversation_id: str  # for a channel post, without its ";messageid=" thread suffix
    thread: str | None  # that suffix: the root activity id of the channel thread it came in
    sender_aad: str | None  # the Azure AD object id of the person who acted
    bot_added: bool  # conversationUpdate/installationUpdate that (re)installed the bot
    reference: dict[str, Any]  # the serialized ConversationReference, for proactive sends
    personal: bool = False  # a 1:1 chat between the bot and the sender
    activity_id: str | None = None  # Teams' id of the activity (a retried one keeps it)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message to send: plain text and/or one Adaptive Card, with @mention entities."""

    text: str | None = None
    card: dict[str, Any] | None = None
    mentions: tuple[dict[str, Any], ...] = ()  # {"type": "mention", "text", "mentioned"}


@dataclass(frozen=True, slots=True)
class InvokeReply:
    status: int
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TurnReply:
    """What a turn answers: for an invoke, its response. Messages into the conversation go
    through the outbox (``bot.teams.sink``), paced and retried, never sent inline."""

    invoke: InvokeReply | None = None


class BadActivity(Exception):
    """The body is not an activity."""


class ForeignTenant(Exception):
    """The activity comes from another Microsoft 365 tenant than ``teams.tenantId``."""


def stated_tenants(body: dict[str, Any], claims: dict[str, Any]) -> list[object]:
    """Every tenant id the request states (``tenant_refusal``), read from the body as sent:
    ``channelData.tenant.id``, ``conversation.tenantId`` (Teams' spelling, which the SDK's
    model drops: it reads only ``tenantID``) and ``conversation.tenantID``, and the token's
    ``tid`` claim. A missing key or a null states nothing; any other value is compared."""
    named: list[object] = []
    data = body.get("channelData")
    tenant = data.get("tenant") if isinstance(data, dict) else None
    named.append(tenant.get("id") if isinstance(tenant, dict) else tenant)
    conversation = body.get("conversation")
    if isinstance(conversation, dict):
        named += [conversation.get("tenantId"), conversation.get("tenantID")]
    named.append(claims.get("tid"))
    return named


def tenant_refusal(required: str, named: Iterable[object]) -> str | None:
    """Why an activity may not act for a bot of tenant ``required`` (None: it may).

    ``named`` is every tenant id the request states: ``channelData.tenant.id`` and
    ``conversation.tenantId`` of the activity (where Teams puts it), and the token's ``tid``
    claim when it has one (Bot Framework channel tokens carry none). Each one stated must be
    ``required``; with ``required`` set, an activity stating none is refused too: Teams always
    sends ``channelData.tenant``, so one without it did not come from Teams."""
    if not required:
        return None
    stated = [tenant for tenant in named if tenant is not None]
    if not stated:
        return "the activity names no tenant, and teams.tenantId requires one"
    for tenant in stated:
        # Tenant ids are GUIDs; Teams and Entra spell them in lowercase, but case is no identity.
        if not isinstance(tenant, str) or tenant.lower() != required.lower():
            return f"the activity is from tenant {str(tenant)[:64]!r}, not teams.tenantId"
    return None


@dataclass
class ConnectorFailure(Exception):
    """A call to the Bot Connector failed; ``status`` is None when no answer came back."""

    message: str
    status: int | None = None
    retry_after: float | None = None

    def __str__(self) -> str:
        return self.message


TurnHandler = Callable[[Incoming], Awaitable[TurnReply]]
Pace = Callable[[str], AbstractAsyncContextManager[None]]
"""``pace(conversation_id)`` is entered around every call to the Bot Connector
(``bot.teams.pacing.Pacing.call``)."""


def thread_conversation_id(conversation_id: str, root_activity_id: str) -> str:
    """The conversation id that posts into a channel thread (PLATFORM.md)."""
    return f"{base_conversation_id(conversation_id)}{THREAD_SUFFIX}{root_activity_id}"


def base_conversation_id(conversation_id: str) -> str:
    """A channel post's conversation id without its thread suffix."""
    return conversation_id.split(THREAD_SUFFIX, 1)[0]


def thread_root(conversation_id: str) -> str | None:
    """The root activity id in a channel post's conversation id (None: not in a thread)."""
    _, found, root = conversation_id.partition(THREAD_SUFFIX)
    return root or None if found else None
