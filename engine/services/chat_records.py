"""What the chat front ends remember of their platforms: conversations (Teams), each person's
personal chat with the bot, the thread of each run in a channel, the message of each card (to
update it in place), and the chat messages they queue themselves (replies to commands)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from engine.domain.errors import StoreError
from engine.domain.model import ChatMessageRef, ChatThread, Conversation, OutboxMessage


class ChatStore(Protocol):
    """The store's chat records and its outbox's queue."""

    async def put_conversation(
        self, platform: str, conversation_id: str, reference: dict[str, Any], now: datetime
    ) -> Conversation: ...
    async def conversation(
        self, platform: str, *, name: str | None = None, conversation_id: str | None = None
    ) -> Conversation | None: ...
    async def name_conversation(
        self, platform: str, conversation_id: str, name: str, now: datetime
    ) -> Conversation: ...
    async def chat_thread(self, run_id: str, channel: str) -> ChatThread | None: ...
    async def put_chat_thread(
        self,
        run_id: str,
        channel: str,
        platform: str,
        thread_ref: str,
        now: datetime,
        data: dict[str, Any] | None = None,
    ) -> ChatThread: ...
    async def chat_messages(
        self,
        *,
        request_id: str | None = None,
        run_id: str | None = None,
        kind: str | None = None,
    ) -> list[ChatMessageRef]: ...
    async def add_chat_message(
        self,
        run_id: str,
        request_id: str | None,
        channel: str,
        platform: str,
        kind: str,
        message_ref: str,
        now: datetime,
        data: dict[str, Any] | None = None,
    ) -> None: ...
    async def queue_outbox(self, messages: Sequence[OutboxMessage], now: datetime) -> None: ...
    async def put_personal_chat(
        self,
        platform: str,
        user_id: str,
        conversation_id: str,
        reference: dict[str, Any],
        now: datetime,
    ) -> None: ...
    async def personal_chat(self, platform: str, user_id: str) -> Conversation | None: ...


class ChatRecords:
    """The chat front ends' records, on a ``ChatStore``."""

    def __init__(self, store: ChatStore) -> None:
        self._store = store

    async def remember_conversation(
        self, platform: str, conversation_id: str, reference: dict[str, Any], now: datetime
    ) -> Conversation:
        """Store (or refresh) a conversation reference, keeping its name."""
        try:
            return await self._store.put_conversation(platform, conversation_id, reference, now)
        except StoreError:
            # Teams sends conversationUpdate and installationUpdate at once; on PostgreSQL both
            # may find no row and insert (put_conversation is update-else-insert, not an
            # upsert), and the loser hits the primary key. Its second try is an update.
            return await self._store.put_conversation(platform, conversation_id, reference, now)

    async def conversation(
        self, platform: str, *, name: str | None = None, conversation_id: str | None = None
    ) -> Conversation | None:
        return await self._store.conversation(platform, name=name, conversation_id=conversation_id)

    async def name_conversation(
        self, platform: str, conversation_id: str, name: str, now: datetime
    ) -> Conversation:
        """Name a conversation (``teams:<name>`` targets it); the name moves if it was used."""
        return await self._store.name_conversation(platform, conversation_id, name, now)

    async def thread(self, run_id: str, channel: str) -> ChatThread | None:
        return await self._store.chat_thread(run_id, channel)

    async def remember_thread(
        self,
        run_id: str,
        channel: str,
        platform: str,
        thread_ref: str,
        now: datetime,
        data: dict[str, Any] | None = None,
    ) -> ChatThread:
        """Record the run's thread in ``channel``; the thread already recorded wins a race."""
        return await self._store.put_chat_thread(run_id, channel, platform, thread_ref, now, data)

    async def messages(
        self,
        *,
        request_id: str | None = None,
        run_id: str | None = None,
        kind: str | None = None,
    ) -> list[ChatMessageRef]:
        return await self._store.chat_messages(request_id=request_id, run_id=run_id, kind=kind)

    async def remember_message(
        self,
        run_id: str,
        request_id: str | None,
        channel: str,
        platform: str,
        kind: str,
        message_ref: str,
        now: datetime,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Remember a posted message (a card, to update it in place later)."""
        await self._store.add_chat_message(
            run_id, request_id, channel, platform, kind, message_ref, now, data
        )

    async def queue_messages(self, messages: Sequence[OutboxMessage], now: datetime) -> None:
        """Queue messages for the dispatcher (a reply to a command)."""
        await self._store.queue_outbox(messages, now)

    async def remember_personal_chat(
        self,
        platform: str,
        user_id: str,
        conversation_id: str,
        reference: dict[str, Any],
        now: datetime,
    ) -> None:
        """Store (or move) the personal chat of the person whose id on ``platform`` is
        ``user_id``: cards addressed to them go there (``teams:@alice``)."""
        await self._store.put_personal_chat(platform, user_id, conversation_id, reference, now)

    async def personal_chat(self, platform: str, user_id: str) -> Conversation | None:
        """The personal chat stored for ``user_id`` on ``platform``; None: never installed."""
        return await self._store.personal_chat(platform, user_id)
