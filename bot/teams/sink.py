"""Delivering the outbox to Teams: approval cards, their updates, and the thread notices.

A channel ``teams:<name>`` is a conversation an admin named with ``subscribe <name>``. In a
Teams channel each run gets one thread: the run's first message there is the root, and every
later card and notice is a reply, posted to ``<conversation id>;messageid=<root id>``. Personal
and group chats have no threads; messages simply follow each other. The id of every card we post
is stored, so ``card_update`` rows can replace it for everyone (``update_activity``).

``reply`` rows (``bot.teams.handlers``) answer a message: they carry the conversation
reference and thread of the message they answer, so they need no named conversation.

Failures become ``DeliveryError``: 429, 412, 502, 504 (and other 5xx, and no answer at all) are
retried, after ``Retry-After`` when the connector gave one, else with the dispatcher's
exponential backoff; any other 4xx is permanent (the message cannot succeed as it is).
"""

from __future__ import annotations

import logging
from typing import Any

from bot.teams.activities import ConnectorFailure, Outgoing, base_conversation_id
from bot.teams.adapter import TeamsAdapter
from bot.teams.handlers import REPLY
from bot.teams.messages import approval_card, notice_message, reply
from bot.teams.pacing import Throttled
from engine.assembly import Engine
from engine.domain.errors import DeliveryError, NotFound
from engine.domain.model import Conversation, OutboxRecord

log = logging.getLogger(__name__)

PLATFORM = "teams"
RETRIED_STATUSES = frozenset({429, 412, 502, 504})


class TeamsSink:
    """The outbox's ``Sink`` for ``teams:`` channels."""

    # 7 messages per second per conversation; the longer windows are in ``Pacing``.
    min_interval = 1 / 7

    def __init__(self, engine: Engine, adapter: TeamsAdapter) -> None:
        self.engine = engine
        self.adapter = adapter  # it paces every call (``bot.teams.pacing``)

    async def deliver(self, message: OutboxRecord) -> None:
        try:
            if message.kind == REPLY:
                await self._reply(message)
            else:
                await self._to_named(message)
        except ConnectorFailure as exc:
            raise _delivery_error(exc) from exc
        except Throttled as exc:
            raise DeliveryError(str(exc), retry_after=exc.retry_after) from exc

    async def _reply(self, message: OutboxRecord) -> None:
        reference, thread, text = (message.payload.get(k) for k in ("reference", "thread", "text"))
        if not isinstance(reference, dict) or not isinstance(text, str):
            raise DeliveryError("a reply row without a reference or text", permanent=True)
        await self.adapter.send(
            reference, reply(text), thread=thread if isinstance(thread, str) else None
        )

    async def _to_named(self, message: OutboxRecord) -> None:
        name = message.channel.partition(":")[2]
        conversation = await self.engine.chat.conversation(PLATFORM, name=name)
        if conversation is None:
            raise DeliveryError(
                f"no Teams conversation is named {name!r}: an admin writes "
                f"'subscribe {name}' to the bot there",
                permanent=True,
            )
        if message.kind == "card":
            await self._card(message, conversation)
        elif message.kind == "card_update":
            await self._update(message, conversation)
        elif message.kind == "notice":
            await self._notice(message, conversation)
        else:
            raise DeliveryError(f"unknown message kind {message.kind!r}", permanent=True)

    async def _card(self, message: OutboxRecord, conversation: Conversation) -> None:
        if message.request_id is None:
            raise DeliveryError("a card row without a request id", permanent=True)
        if await self._posted_cards(message):
            return  # sent before a crash kept it from being marked sent: never post twice
        try:
            request = await self.engine.queries.get_takeover(message.request_id)
        except NotFound:
            raise DeliveryError("the request no longer exists", permanent=True) from None
        card = await approval_card(self.engine, request)
        activity_id, thread = await self._post(message, conversation, Outgoing(card=card))
        await self.engine.chat.remember_message(
            request.run_id,
            request.id,
            message.channel,
            PLATFORM,
            "card",
            activity_id,
            self.engine.clock.now(),
            data={"thread": thread, "conversationId": conversation.conversation_id},
        )

    async def _update(self, message: OutboxRecord, conversation: Conversation) -> None:
        posted = await self._posted_cards(message)
        if not posted or message.request_id is None:
            log.info("no Teams card to update for %s in %s", message.request_id, message.channel)
            return
        request = await self.engine.queries.get_takeover(message.request_id)
        card = await approval_card(self.engine, request)
        for ref in posted:
            thread = ref.data.get("thread")
            await self.adapter.update(
                conversation.reference,
                ref.message_ref,
                Outgoing(card=card),
                thread=thread if isinstance(thread, str) else None,
            )

    async def _notice(self, message: OutboxRecord, conversation: Conversation) -> None:
        outgoing = await notice_message(self.engine, message)
        if outgoing is None:
            log.info("outbox notice %s has nothing to show; skipped", message.id)
            return
        await self._post(message, conversation, outgoing)

    async def _post(
        self, message: OutboxRecord, conversation: Conversation, outgoing: Outgoing
    ) -> tuple[str, str | None]:
        """Post into the run's thread (starting it in a channel); returns the new activity id
        and the thread root it was posted under (None: top level)."""
        thread = await self._thread_root(message, conversation)
        activity_id = await self.adapter.send(conversation.reference, outgoing, thread=thread)
        if thread is None and message.run_id is not None and _is_channel(conversation):
            winner = await self.engine.chat.remember_thread(
                message.run_id,
                message.channel,
                PLATFORM,
                activity_id,
                self.engine.clock.now(),
                data={"conversationId": conversation.conversation_id},
            )
            if winner.thread_ref != activity_id:  # another replica started it first
                log.info("run %s already had a thread in %s", message.run_id, message.channel)
        return activity_id, thread

    async def _thread_root(self, message: OutboxRecord, conversation: Conversation) -> str | None:
        if message.run_id is None or not _is_channel(conversation):
            return None
        thread = await self.engine.chat.thread(message.run_id, message.channel)
        return thread.thread_ref if thread is not None else None

    async def _posted_cards(self, message: OutboxRecord) -> list[Any]:
        if message.request_id is None:
            return []
        found = await self.engine.chat.messages(request_id=message.request_id, kind="card")
        return [m for m in found if m.channel == message.channel and m.platform == PLATFORM]


def _is_channel(conversation: Conversation) -> bool:
    inner = conversation.reference.get("conversation") or {}
    kind = inner.get("conversationType")
    if kind is not None:
        return bool(kind == "channel")
    # Older references lack the type; channel conversations are "19:...@thread.tacv2/skype".
    return base_conversation_id(conversation.conversation_id).endswith(
        ("@thread.tacv2", "@thread.skype")
    )


def _delivery_error(exc: ConnectorFailure) -> DeliveryError:
    status = exc.status
    if status is None or status in RETRIED_STATUSES or status >= 500:
        return DeliveryError(str(exc), retry_after=exc.retry_after)
    return DeliveryError(str(exc), permanent=True)
