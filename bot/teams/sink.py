"""Delivering the outbox to Teams: approval cards, their updates, and the thread notices.

A channel ``teams:<name>`` is a conversation an admin named with ``subscribe <name>``. In a
Teams channel each run gets one thread: the run's first message there is the root, and every
later card and notice is a reply, posted to ``<conversation id>;messageid=<root id>``. Personal
and group chats have no threads; messages simply follow each other. The id of every card we post
is stored, so ``card_update`` rows can replace it for everyone (``update_activity``).

``reply`` rows (``bot.teams.handlers``) answer a message: they carry the conversation
reference and thread of the message they answer, so they need no named conversation; so do
``listed_card`` rows, the cards "pending" shows in a personal chat (``bot.teams.personal``).

A channel ``teams:@<person>`` is that person's personal chat with the bot (``teams:dm`` and
``teams:@<group>`` are expanded to such channels when the request is made,
``engine.config.channels.expand_channels``, so each person's copy is an outbox channel of its
own): its card goes to the personal chat stored under their Teams id (they installed the bot).
Someone without one is not reached: that is logged, and their row is done (the others are rows
of their own). Of its notices, only reminders and escalations (which ask the person to act)
are sent there; the decision itself shows on the card. The one other notice a personal chat
gets is how a request its person made ended (``requester``: ``engine.domain.notify``), sent
whether or not a card of that request is there.

Every copy of a request's card is updated on a decision (``update_activity``, each in its own
conversation): a ``card_update`` row of a channel updates the copy posted for that channel,
and the one of the request's first ``teams:`` channel also updates the copies "pending" listed.

Failures become ``DeliveryError``: 429, 412, 502, 504 (and other 5xx, and no answer at all) are
retried, after ``Retry-After`` when the connector gave one, else with the dispatcher's
exponential backoff; any other 4xx is permanent (the message cannot succeed as it is), except
in a person's chat: a 403 or 404 there (the bot was removed from it) leaves that person
unreached, which is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.teams.activities import ConnectorFailure, Outgoing, base_conversation_id
from bot.teams.adapter import TeamsAdapter
from bot.teams.handlers import REPLY
from bot.teams.messages import approval_card, notice_message, reply
from bot.teams.pacing import Throttled
from bot.teams.personal import LISTED
from engine.assembly import Engine
from engine.config.channels import addressed_person
from engine.domain.errors import DeliveryError, NotFound
from engine.domain.model import ChatMessageRef, Conversation, OutboxRecord, TakeoverRequest

log = logging.getLogger(__name__)

PLATFORM = "teams"
RETRIED_STATUSES = frozenset({429, 412, 502, 504})
CARD = "card"  # a remembered card (chat_messages.kind), to update in place
PERSONAL_NOTICES = frozenset({"reminder", "escalated"})  # sent to personal chats
# A chat the bot was removed from (403 BotNotInConversationRoster) or that is gone (404): the
# person is unreachable there, which must not keep the card from the others.
GONE_STATUSES = frozenset({403, 404})


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
            elif message.kind == LISTED:
                await self._listed(message)
            elif message.kind == "card_update":
                await self._update(message)
            elif (person := addressed_person(message.channel)) is not None:
                await self._to_person(message, person)
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

    async def _listed(self, message: OutboxRecord) -> None:
        """A card "pending" listed, into the personal chat that asked (its reference)."""
        reference = message.payload.get("reference")
        request = await self._request(message)
        if not isinstance(reference, dict) or request is None:
            raise DeliveryError("a listed card without a reference or request", permanent=True)
        posted = await self._posted_cards(message)
        if any(copy.data.get("outbox") == message.id for copy in posted):
            return  # sent before a crash kept it from being marked sent: never post twice
        await self._send_copy(message, request, reference, {"outbox": message.id})

    async def _to_person(self, message: OutboxRecord, name: str) -> None:
        """``teams:@<person>``: their personal chat (module docstring)."""
        request = await self._request(message)
        if request is None:
            raise DeliveryError("a personal card without a request", permanent=True)
        if message.kind == "card":
            await self._card_to_person(message, request, name)
        elif message.kind == "notice":
            if message.payload.get("requester") == name:  # how their own request ended
                await self._notice_to_requester(message, name)
            elif message.payload.get("notice") in PERSONAL_NOTICES:  # else: the card shows it
                await self._notice_to_person(message)
        else:
            raise DeliveryError(f"unknown message kind {message.kind!r}", permanent=True)

    async def _card_to_person(
        self, message: OutboxRecord, request: TakeoverRequest, name: str
    ) -> None:
        """The card into ``name``'s personal chat, or a line in the log saying why not."""
        if await self._posted_cards(message):
            return  # sent before a crash kept it from being marked sent: never post twice

        async def send(reference: dict[str, Any]) -> None:
            await self._send_copy(message, request, reference, {"person": name})

        await self._in_personal_chat(name, send, f"the card of request {request.id}")

    async def _notice_to_requester(self, message: OutboxRecord, name: str) -> None:
        """How ``name``'s own request ended, into their personal chat (whether or not its card
        is there: the requester is seldom one of its approvers)."""
        outgoing = await notice_message(self.engine, message)
        if outgoing is None:
            return

        async def send(reference: dict[str, Any]) -> None:
            await self.adapter.send(reference, outgoing)

        await self._in_personal_chat(name, send, f"the outcome of request {message.request_id}")

    async def _in_personal_chat(
        self, name: str, send: Callable[[dict[str, Any]], Awaitable[None]], what: str
    ) -> None:
        """``send`` into ``name``'s personal chat with the bot, or a line in the log saying
        why it could not reach them (a chat that is gone ends the row; others are retried)."""
        person = self.engine.config.people.get(name)
        aad = person.ids.get(PLATFORM) if person is not None else None
        why = "has no teams: id in people:"
        if aad is not None:
            chat = await self.engine.chat.personal_chat(PLATFORM, aad)
            why = "has no personal chat with the bot (never added it)"
            if chat is not None:
                try:
                    await send(chat.reference)
                    return
                except ConnectorFailure as exc:
                    if exc.status not in GONE_STATUSES:
                        raise  # retried
                    why = f"has removed the bot from their personal chat (HTTP {exc.status})"
        log.warning("teams: %s %s, so %s did not reach them", name, why, what)

    async def _notice_to_person(self, message: OutboxRecord) -> None:
        """A reminder or escalation, beside the card sent to this person's chat."""
        outgoing = await notice_message(self.engine, message)
        if outgoing is None:
            return
        for copy in await self._posted_cards(message):
            reference = copy.data.get("reference")
            if isinstance(reference, dict):
                await self.adapter.send(reference, outgoing)

    async def _send_copy(
        self,
        message: OutboxRecord,
        request: TakeoverRequest,
        reference: dict[str, Any],
        data: dict[str, Any],
    ) -> None:
        """Post the request's card into a chat and remember it there (with its reference)."""
        card = await approval_card(self.engine, request)
        activity_id = await self.adapter.send(reference, Outgoing(card=card))
        await self.engine.chat.remember_message(
            request.run_id,
            request.id,
            message.channel,
            PLATFORM,
            CARD,
            activity_id,
            self.engine.clock.now(),
            data={**data, "reference": reference},
        )

    async def _request(self, message: OutboxRecord) -> TakeoverRequest | None:
        request_id = message.request_id or message.payload.get("requestId")
        if not isinstance(request_id, str):
            return None
        try:
            return await self.engine.queries.get_takeover(request_id)
        except NotFound:
            return None

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

    async def _update(self, message: OutboxRecord) -> None:
        """Replace every copy of the request's card this row owns (module docstring), each in
        the conversation it was posted in."""
        if message.request_id is None:
            return
        try:
            request = await self.engine.queries.get_takeover(message.request_id)
        except NotFound:
            return
        copies = owned_copies(await self._cards(message.request_id), message.channel, request)
        if not copies:
            log.info("no Teams card to update for %s in %s", message.request_id, message.channel)
            return
        card = await approval_card(self.engine, request)
        for copy in copies:
            reference = await self._reference(copy)
            if reference is None:
                log.info("teams: the conversation of card %s is gone", copy.message_ref)
                continue
            thread = copy.data.get("thread")
            try:
                await self.adapter.update(
                    reference,
                    copy.message_ref,
                    Outgoing(card=card),
                    thread=thread if isinstance(thread, str) else None,
                )
            except ConnectorFailure as exc:
                if exc.status not in GONE_STATUSES:
                    raise  # retried: updating the copies done already again changes nothing
                log.info("teams: card %s is gone (HTTP %s)", copy.message_ref, exc.status)

    async def _reference(self, copy: ChatMessageRef) -> dict[str, Any] | None:
        """The conversation reference a card was posted with: kept with it (personal chats),
        or its named conversation's."""
        kept = copy.data.get("reference")
        if isinstance(kept, dict):
            return kept
        conversation_id = copy.data.get("conversationId")
        if isinstance(conversation_id, str):
            found = await self.engine.chat.conversation(PLATFORM, conversation_id=conversation_id)
        else:
            found = await self.engine.chat.conversation(
                PLATFORM, name=copy.channel.partition(":")[2]
            )
        return found.reference if found is not None else None

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

    async def _posted_cards(self, message: OutboxRecord) -> list[ChatMessageRef]:
        if message.request_id is None:
            return []
        found = await self._cards(message.request_id)
        return [m for m in found if m.channel == message.channel]

    async def _cards(self, request_id: str, kind: str = CARD) -> list[ChatMessageRef]:
        """The request's Teams messages of ``kind`` (its cards, by default), every channel."""
        found = await self.engine.chat.messages(request_id=request_id, kind=kind)
        return [m for m in found if m.platform == PLATFORM]


def owned_copies(
    copies: list[ChatMessageRef], channel: str, request: TakeoverRequest
) -> list[ChatMessageRef]:
    """The copies a ``card_update`` of ``channel`` updates: those posted for it and, for the
    request's first ``teams:`` channel, those posted for none of its channels (listed)."""
    first = next((c for c in request.channels if c.startswith(f"{PLATFORM}:")), None)
    return [
        copy
        for copy in copies
        if copy.channel == channel or (channel == first and copy.channel not in request.channels)
    ]


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
