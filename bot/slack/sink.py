"""Delivering the outbox to Slack: cards, card updates and notices, in one thread per run.

Threads. A run has one thread per channel. Its root is, in order of preference: the thread the
run was started from (``input.slack.channel`` + ``input.slack.thread_ts``, same channel), else
the run's first card there. Every later card and notice of the run goes into that thread. A
notice that arrives before any card (the gate's confidence notice is queued in the same
transaction as the card it explains, and ahead of it) first posts the run's newest card for the
channel as the root; the card's own outbox row then finds it posted and does nothing.

Direct messages. A channel ``slack:@<person>`` is that person's direct message with the bot
(``slack:dm`` and ``slack:@<group>`` are expanded to such channels when the request is made):
their Slack user id comes from ``bot.slack.people.SlackPeople.slack_id``, the IM channel from
``conversations.open``. Each copy of a card is a card of its own channel, updated by that
channel's ``card_update``, and the run's notices go into the thread under it, in the DM.

Posting once, without reading Slack. Signoff never reads a conversation (Slack allows apps
outside its Marketplace one ``conversations.history`` / ``replies`` request a minute): what it
knows of its messages is in its own database. Every attempt to post first writes an attempt
marker (``chat_messages`` kind ``slack_attempt``, ref = the outbox dedupe key), and a posted
message is recorded with its ts. The markers, not ``attempts``, are what catch a crash between a
successful ``chat.postMessage`` and the record: the outbox hands such a row out again once its
claim lapses, with ``attempts`` unchanged. A delivery that finds an earlier marker, and does not
know (in this process) that Slack refused every earlier attempt, cannot tell whether the
message is already in Slack. Slack's ``chat.postMessage`` takes no idempotency key, so it posts
again, marked (``bot.slack.render.reposted``): the copy says an earlier one may show above and
that it replaces it. So a crash costs at most one visible, labelled duplicate, never a lost card.
Every message still carries Slack message metadata ``{event_type: "signoff_outbox",
event_payload: {dedupe: <key>}}``, for people and tools that read the channel.

Home tabs. Once a request's card or card update is delivered (a new request, a decision, an
expiry), ``on_change`` is told its id: the Home tabs of the people it concerns are published
again (``bot.slack.home``), in the background.

Pacing and errors. ``min_interval`` (default 1 s: ``chat.postMessage`` allows about one message
per second per channel, https://docs.slack.dev/reference/methods/chat.postMessage)
is applied by the dispatcher per channel. HTTP 429 becomes ``DeliveryError(retry_after=...)``,
and the sink itself refuses to call Slack for that channel until ``Retry-After`` has passed.
Rate limits, 5xx and unknown errors are retried with backoff; errors that cannot succeed on a
retry (``invalid_blocks``, ``channel_not_found``, ``not_in_channel`` ...) give up at once. A card
update Slack refuses for good (``cant_update_message``, ``message_not_found`` ...) is told to the
person who decided (``bot.slack.refused``): the decision stands, and the stale buttons on the
card only answer that it was already decided.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError

from bot.slack.api import SlackApi, error_code, retry_after_seconds
from bot.slack.installs import NotInstalled, split_target
from bot.slack.people import DirectMessages, LookupUnavailable, SlackPeople
from bot.slack.refused import UPDATE_REFUSED, RefusedUpdates
from bot.slack.render import REPOSTED_CARD, REPOSTED_NOTICE, SlackMessages, reposted
from cards.render import CardTooLarge
from engine.assembly import Engine
from engine.config.channels import addressed_person
from engine.domain import notify
from engine.domain.errors import DeliveryError, NotFound, SignoffError
from engine.domain.model import ChatMessageRef, OutboxRecord, Run

log = logging.getLogger(__name__)

PLATFORM = "slack"
MAX_WAIT_SECONDS = 2.0  # a Retry-After still running longer than this is left to the outbox
CARD, NOTICE, ATTEMPT = "card", "notice", "slack_attempt"
PERMANENT = frozenset(
    {
        "invalid_blocks",
        "invalid_blocks_format",
        "msg_too_long",
        "msg_blocks_too_long",
        "no_text",
        "too_many_attachments",
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "message_not_found",
        "cant_update_message",
        "edit_window_closed",
        "invalid_metadata_format",
        "invalid_metadata_schema",
        "metadata_too_large",
        "invalid_arguments",
        "restricted_action",
        "missing_scope",  # e.g. im:write, for direct messages: the app must be reinstalled
        "user_not_found",
        "user_not_visible",
        "user_disabled",
        "cannot_dm_bot",
    }
)


class SlackSink:
    """The ``slack`` platform of the outbox: channels ``slack:<channel id>`` (or
    ``slack:<team id>/<channel id>``: ``SlackApi`` calls with that workspace's token) and
    ``slack:@<person>`` (their direct message with the bot)."""

    def __init__(
        self,
        engine: Engine,
        api: SlackApi,
        *,
        min_interval: float = 1.0,
        on_change: Callable[[str], None] | None = None,
        people: SlackPeople,
    ) -> None:
        self.engine = engine
        self.on_change = on_change  # told a request id once its card is delivered (Home tabs)
        self.queries = engine.queries
        self.chat = engine.chat
        self.api = api
        self.people = people
        self.messages = SlackMessages(engine, people)
        self.direct = DirectMessages(api)
        self.refused_updates = RefusedUpdates(engine, api, self.target, self._slack_id)
        self.min_interval = min_interval
        self._blocked_until: dict[str, float] = {}  # channel -> loop time Slack said to wait
        self._refused: dict[str, int] = {}  # dedupe key -> attempts, all refused by Slack

    async def target(self, channel: str) -> str:
        """The Slack channel id behind ``channel``: ``slack:C123`` is ``C123``; ``slack:@alice``
        is alice's direct message with the bot (opened on first use)."""
        person = addressed_person(channel)
        if person is None:
            return channel.partition(":")[2]
        user_id = await self._slack_id(person)
        if user_id is None:
            raise DeliveryError(
                f"{person} has no Slack user id (people: {person}: slack), so no direct "
                "message can reach them",
                permanent=True,
            )
        team, user = split_target(user_id)
        im = await self.direct.channel(user, team)
        return f"{team}/{im}" if team else im

    async def _slack_id(self, person: str) -> str | None:
        """``person``'s Slack user id (``SlackPeople``: their ``slack:`` id, else their email)."""
        try:
            return await self.people.slack_id(person)
        except LookupUnavailable as exc:
            raise DeliveryError(f"Slack did not answer a lookup of {person}: {exc}") from exc

    async def deliver(self, message: OutboxRecord) -> None:
        channel = message.channel
        wait = self._blocked_until.get(channel, 0.0) - asyncio.get_running_loop().time()
        if wait > MAX_WAIT_SECONDS:
            raise DeliveryError("Slack asked to wait (Retry-After)", retry_after=wait)
        if wait > 0:  # a short wait is pacing: it does not cost the message an attempt
            await asyncio.sleep(wait)
        try:
            if message.kind == "card":
                await self._card(message, await self.target(channel))
            elif message.kind == "card_update":
                await self._update(message)
            elif message.kind == "notice":
                await self._notice(message, await self.target(channel))
            else:
                raise DeliveryError(f"unknown message kind {message.kind!r}", permanent=True)
            if message.kind in (CARD, "card_update") and self.on_change is not None:
                self.on_change(str(message.payload["requestId"]))
        except SlackApiError as exc:
            raise self._failure(channel, exc) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DeliveryError(f"Slack did not answer: {type(exc).__name__}: {exc}") from exc
        except CardTooLarge as exc:
            raise DeliveryError(f"a Block Kit limit is broken: {exc}", permanent=True) from exc
        except NotFound as exc:
            raise DeliveryError(exc.message, permanent=True) from exc
        except DeliveryError:
            raise  # a SignoffError too, but already the sink's verdict
        except SignoffError as exc:  # the database: try again later
            raise DeliveryError(exc.message) from exc

    def _failure(self, channel: str, exc: SlackApiError) -> DeliveryError:
        if isinstance(exc, NotInstalled):  # no workspace's token for it: no retry will find one
            return DeliveryError(exc.reason, permanent=True)
        retry_after = retry_after_seconds(exc)
        if retry_after is not None:
            until = asyncio.get_running_loop().time() + retry_after
            self._blocked_until[channel] = max(self._blocked_until.get(channel, 0.0), until)
            return DeliveryError(
                f"rate limited by Slack (Retry-After {retry_after:g} s)", retry_after=retry_after
            )
        code = error_code(exc)
        status = getattr(exc.response, "status_code", "?")
        return DeliveryError(f"Slack answered {code} (HTTP {status})", permanent=code in PERMANENT)

    # -- kinds ---------------------------------------------------------------------------------

    async def _card(self, message: OutboxRecord, target: str) -> None:
        request_id = str(message.payload["requestId"])
        if message.run_id is None:
            content = await self.messages.card(request_id)
            await self.api.post(target, content, thread_ts=None, dedupe_key=message.dedupe_key)
            return
        state = await self._state(message.run_id, message.channel, target)
        if any(m.kind == CARD and m.request_id == request_id for m in state.messages):
            return  # posted already (ahead of a notice, or before a crash)
        await self._post_card(state, request_id, message.dedupe_key)

    async def _update(self, message: OutboxRecord) -> None:
        """``chat.update`` of every card of the request in this channel, to its current state.
        A copy Slack refuses to change for good is told to whoever decided; the others are
        still updated. A failure that may pass is raised (to retry every copy) first."""
        request_id = str(message.payload["requestId"])
        cards = [
            m
            for m in await self.chat.messages(request_id=request_id, kind=CARD)
            if m.channel == message.channel
        ]
        if not cards:
            log.info("no Slack card of %s in %s to update", request_id, message.channel)
            return
        target = await self.target(message.channel)
        content = await self.messages.card(request_id)
        refused: list[tuple[ChatMessageRef, str]] = []
        for card in cards:
            shown = reposted(content, REPOSTED_CARD) if card.data.get("reposted") else content
            try:
                await self.api.update(target, card.message_ref, shown)
            except SlackApiError as exc:
                if error_code(exc) not in UPDATE_REFUSED:
                    raise
                refused.append((card, error_code(exc)))
        for card, code in refused:
            await self.refused_updates.tell(request_id, card, target, code)

    async def _notice(self, message: OutboxRecord, target: str) -> None:
        if message.run_id is None:
            rendered = await self.messages.notice(message)
            if rendered is not None:
                await self.api.post(
                    target, rendered.message, thread_ts=None, dedupe_key=message.dedupe_key
                )
            return
        state = await self._state(message.run_id, message.channel, target)
        rendered = await self.messages.notice(message)
        if rendered is None:
            log.warning("outbox message %s: unknown notice %r", message.id, message.payload)
            return
        if state.thread is None:
            await self._card_ahead(state)
        ts, again = await self._post(
            state, rendered.message, message.dedupe_key, message.request_id, REPOSTED_NOTICE
        )
        data = {**rendered.data, "reposted": True} if again else rendered.data
        await self._remember(state, message.request_id, NOTICE, ts, data)

    # -- threads and posting -------------------------------------------------------------------

    async def _state(self, run_id: str, channel: str, target: str) -> _Thread:
        """The run, its messages in this channel and the root of its thread there (found
        again from a stored card, or taken from the run's input, when not recorded yet)."""
        run, messages, recorded = await asyncio.gather(
            self.queries.get_run(run_id),
            self.chat.messages(run_id=run_id),
            self.chat.thread(run_id, channel),
        )
        state = _Thread(run, channel, target, [m for m in messages if m.channel == channel])
        if recorded is not None:
            state.thread = recorded.thread_ref
            return state
        cards = [m for m in state.messages if m.kind == CARD]
        source = run.input.get("slack") if isinstance(run.input, dict) else None
        root, origin = None, "card"
        if cards:  # stopped between storing the card and the thread
            root = str(cards[0].data.get("threadTs") or cards[0].message_ref)
        elif isinstance(source, dict) and source.get("channel") == split_target(target)[1]:
            thread_ts = source.get("thread_ts")
            origin = "input"
            root = thread_ts if isinstance(thread_ts, str) and thread_ts else None
        if root is not None:
            kept = await self.chat.remember_thread(
                run_id, channel, PLATFORM, root, self.engine.clock.now(), data={"from": origin}
            )
            state.thread = kept.thread_ref
        return state

    async def _post_card(self, state: _Thread, request_id: str, dedupe_key: str) -> None:
        """Post a request's card into its run's thread (or as the root of a new one), and store
        its ts so it can be updated."""
        content = await self.messages.card(request_id, run=state.run)
        ts, again = await self._post(state, content, dedupe_key, request_id, REPOSTED_CARD)
        # The Slack channel id too: a direct message's (slack:@bob) is not in its address.
        data: dict[str, Any] = {"threadTs": state.thread or ts, "channelId": state.target}
        if again:
            data["reposted"] = True  # its updates keep saying so
        await self._remember(state, request_id, CARD, ts, data)

    async def _card_ahead(self, state: _Thread) -> None:
        """A notice with no thread to go into. The run's card starts the thread, and only its
        own outbox row posts it (two deliverers of one card would post it twice): while that
        row is still to be delivered, this notice waits for it. A card that failed for good
        leaves the notice to start the thread itself."""
        for request in reversed(await self.queries.list_takeovers(run_id=state.run.id)):
            if state.channel in request.channels:
                (card,) = [m for m in notify.new_card(request) if m.channel == state.channel]
                rows = await self.queries.outbox_messages(run_id=state.run.id)
                status = next(
                    (st for rec, st, _ in rows if rec.dedupe_key == card.dedupe_key), None
                )
                if status == "pending":
                    raise DeliveryError(
                        f"waiting for the card {card.dedupe_key} to start the thread",
                        retry_after=1.0,
                    )
                return

    async def _post(
        self,
        state: _Thread,
        content: dict[str, Any],
        dedupe_key: str,
        request_id: str | None,
        note: str,
    ) -> tuple[str, bool]:
        """Post into the run's thread; returns the ts and whether it was posted again, marked
        with ``note``, after an attempt that may have reached Slack unrecorded."""
        tried = sum(1 for m in state.messages if m.kind == ATTEMPT and m.message_ref == dedupe_key)
        again = bool(tried) and self._refused.get(dedupe_key) != tried
        if again:
            log.warning("%s may have been posted before; posting it again, marked", dedupe_key)
            content = reposted(content, note)
        await self.chat.remember_message(
            state.run.id,
            request_id,
            state.channel,
            PLATFORM,
            ATTEMPT,
            dedupe_key,
            self.engine.clock.now(),
        )
        try:
            ts = await self.api.post(
                state.target, content, thread_ts=state.thread, dedupe_key=dedupe_key
            )
        except (SlackApiError, aiohttp.ClientConnectorError):
            # Slack answered, or was never reached: nothing was posted.
            self._refused[dedupe_key] = tried + 1
            raise
        self._refused.pop(dedupe_key, None)
        return ts, again

    async def _remember(
        self, state: _Thread, request_id: str | None, kind: str, ts: str, data: dict[str, Any]
    ) -> None:
        """Store a posted message; the first one of a run in a channel roots its thread. Both
        writes go together (one commit on SQLite): either alone is enough to find the root."""
        now = self.engine.clock.now()
        run_id, channel = state.run.id, state.channel
        writes: list[Awaitable[Any]] = [
            self.chat.remember_message(run_id, request_id, channel, PLATFORM, kind, ts, now, data)
        ]
        if state.thread is None:
            writes.append(self.chat.remember_thread(run_id, channel, PLATFORM, ts, now))
            state.thread = ts
        await asyncio.gather(*writes)
        state.messages.append(ChatMessageRef(run_id, request_id, channel, PLATFORM, kind, ts, data))


@dataclass
class _Thread:
    """What one delivery knows about its run in one channel."""

    run: Run
    channel: str  # "slack:C123"
    target: str  # "C123"
    messages: list[ChatMessageRef]  # ours, in this channel, oldest first
    thread: str | None = None  # the root ts
