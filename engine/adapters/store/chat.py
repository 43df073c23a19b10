"""Chat threads, the messages we posted (so cards can be updated), named conversations, and
people's personal chats with the bot."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase
from engine.domain.errors import Conflict, NotFound
from engine.domain.model import ChatMessageRef, ChatThread, Conversation


def _thread(row: Any) -> ChatThread:
    return ChatThread(
        row["run_id"], row["channel"], row["platform"], row["thread_ref"], row["data"]
    )


def _message(row: Any) -> ChatMessageRef:
    return ChatMessageRef(
        row["run_id"],
        row["request_id"],
        row["channel"],
        row["platform"],
        row["kind"],
        row["message_ref"],
        row["data"],
    )


def _conversation(row: Any) -> Conversation:
    return Conversation(row["platform"], row["conversation_id"], row["name"], row["reference"])


class ChatStore(StoreBase):
    async def chat_thread(self, run_id: str, channel: str) -> ChatThread | None:
        ct = t.chat_threads
        return await self.first_row(
            select(ct).where(ct.c.run_id == run_id, ct.c.channel == channel), _thread
        )

    async def put_chat_thread(
        self,
        run_id: str,
        channel: str,
        platform: str,
        thread_ref: str,
        now: datetime,
        data: dict[str, Any] | None = None,
    ) -> ChatThread:
        """Record a run's thread in a channel; when one exists already, it wins (returned)."""

        def work(conn: Connection) -> ChatThread:
            ct = t.chat_threads
            conn.execute(
                self.insert_ignore(ct)
                .values(
                    run_id=run_id,
                    channel=channel,
                    platform=platform,
                    thread_ref=thread_ref,
                    data=data or {},
                    created_at=now,
                )
                .on_conflict_do_nothing(index_elements=["run_id", "channel"])
            )
            row = (
                conn.execute(select(ct).where(ct.c.run_id == run_id, ct.c.channel == channel))
                .mappings()
                .one()
            )
            return _thread(row)

        return await self.db.transact(work)

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
    ) -> None:
        def work(conn: Connection) -> None:
            conn.execute(
                insert(t.chat_messages).values(
                    run_id=run_id,
                    request_id=request_id,
                    channel=channel,
                    platform=platform,
                    kind=kind,
                    message_ref=message_ref,
                    data=data or {},
                    created_at=now,
                )
            )

        await self.db.transact(work)

    async def chat_messages(
        self,
        *,
        request_id: str | None = None,
        run_id: str | None = None,
        kind: str | None = None,
    ) -> list[ChatMessageRef]:
        def work(conn: Connection) -> list[ChatMessageRef]:
            cm = t.chat_messages
            q = select(cm).order_by(cm.c.id)
            if request_id is not None:
                q = q.where(cm.c.request_id == request_id)
            if run_id is not None:
                q = q.where(cm.c.run_id == run_id)
            if kind is not None:
                q = q.where(cm.c.kind == kind)
            return [_message(r) for r in conn.execute(q).mappings()]

        return await self.db.transact(work, write=False)

    async def put_conversation(
        self, platform: str, conversation_id: str, reference: dict[str, Any], now: datetime
    ) -> Conversation:
        """Store (or refresh) a conversation reference, keeping its name."""

        def work(conn: Connection) -> Conversation:
            cc = t.chat_conversations
            key = (cc.c.platform == platform, cc.c.conversation_id == conversation_id)
            # Insert-or-nothing, then update: two installation events at once (Teams sends
            # them in pairs) cannot both insert.
            conn.execute(
                self.insert_ignore_on(cc, "platform", "conversation_id"),
                {
                    "platform": platform,
                    "conversation_id": conversation_id,
                    "reference": reference,
                    "updated_at": now,
                },
            )
            conn.execute(update(cc).where(*key).values(reference=reference, updated_at=now))
            return _conversation(conn.execute(select(cc).where(*key)).mappings().one())

        return await self.db.transact(work)

    async def name_conversation(
        self, platform: str, conversation_id: str, name: str, now: datetime
    ) -> Conversation:
        """Give a stored conversation a name (``teams:<name>`` targets it). A name already used
        by another conversation moves to this one."""

        def work(conn: Connection) -> Conversation:
            cc = t.chat_conversations
            conn.execute(
                update(cc)
                .where(
                    cc.c.platform == platform,
                    cc.c.name == name,
                    cc.c.conversation_id != conversation_id,
                )
                .values(name=None)
            )
            done = conn.execute(
                update(cc)
                .where(cc.c.platform == platform, cc.c.conversation_id == conversation_id)
                .values(name=name, updated_at=now)
            )
            if not done.rowcount:
                raise NotFound(f"conversation {conversation_id} is not known")
            row = (
                conn.execute(
                    select(cc).where(
                        cc.c.platform == platform, cc.c.conversation_id == conversation_id
                    )
                )
                .mappings()
                .one()
            )
            return _conversation(row)

        return await self.db.transact(work)

    async def conversation(
        self, platform: str, *, name: str | None = None, conversation_id: str | None = None
    ) -> Conversation | None:
        if (name is None) == (conversation_id is None):
            raise Conflict("give a name or a conversation id")

        cc = t.chat_conversations
        q = select(cc).where(cc.c.platform == platform)
        q = (
            q.where(cc.c.name == name)
            if name is not None
            else q.where(cc.c.conversation_id == conversation_id)
        )
        return await self.first_row(q, _conversation)

    async def put_personal_chat(
        self,
        platform: str,
        user_id: str,
        conversation_id: str,
        reference: dict[str, Any],
        now: datetime,
    ) -> None:
        """Store (or replace) the personal chat of the person ``user_id`` on ``platform``."""

        def work(conn: Connection) -> None:
            cp = t.chat_personal
            row = {"conversation_id": conversation_id, "reference": reference, "updated_at": now}
            # Insert-or-nothing, then update: the two install events Teams sends at once
            # cannot both insert.
            conn.execute(
                self.insert_ignore_on(cp, "platform", "user_id"),
                {"platform": platform, "user_id": user_id, **row},
            )
            conn.execute(
                update(cp).where(cp.c.platform == platform, cp.c.user_id == user_id).values(**row)
            )

        await self.db.transact(work)

    async def personal_chat(self, platform: str, user_id: str) -> Conversation | None:
        """The personal chat of ``user_id`` on ``platform`` (no name), or None."""
        cp = t.chat_personal
        return await self.first_row(
            select(cp).where(cp.c.platform == platform, cp.c.user_id == user_id),
            lambda row: Conversation(
                row["platform"], row["conversation_id"], None, row["reference"]
            ),
        )
