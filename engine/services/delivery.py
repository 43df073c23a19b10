"""Delivering the outbox: one sink per platform, per-channel order and pacing, retries.

A channel is ``<platform>:<target>`` (``slack:C123``, ``teams:ops``, ``webhook:audit``,
``callback:<executionId>``); the platform picks the ``Sink``. Messages of one channel go out
one at a time, in the order they were written (a card before the notices in its thread), no
faster than the sink's ``min_interval``. A sink raises ``DeliveryError`` to ask for a retry
(with the remote's ``Retry-After`` when it gave one) or to give up for good; retries back off
exponentially up to ``MAX_ATTEMPTS``.

Priority. Updates of cards already posted, and the notices of the decisions that caused them,
go before new posts (``engine.domain.outbox.is_urgent``): the store claims them first, and a
channel sending a claimed batch, when woken by newly queued messages, checks for a due card
update of its own and, if there is one, hands the rest of its batch back, so the next claim
puts the update (and its notice) first. (Ephemeral answers to clicks do not queue here at
all: they go straight to the click's ``response_url``.) Moving an update ahead is safe: a card
not posted yet is posted with its current state, and the update then finds nothing to change.

Claims. A dispatcher claims a batch of due messages for ``hold``, which the engine sets to
``server.leaseSeconds``: a replica that dies mid-delivery leaves its claimed messages to the
other replicas after the same time as its runs. A live dispatcher renews its claim while it
sends (a heartbeat, like a run's lease), so a slow remote cannot let the claim lapse under a
message in flight; and once half the hold has gone on paced sends, it hands the rest of the
batch back unsent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.background import BackgroundLoop, cancel_and_wait
from engine.domain.errors import DeliveryError, SignoffError
from engine.domain.model import OutboxRecord
from engine.domain.outbox import is_urgent
from engine.ports import Clock
from engine.ports.sink import Sink
from engine.ports.store import OutboxStore
from engine.services.timers import wait_or_timeout

# ``DeliveryError`` and ``Sink`` are the port's (``engine.ports.sink``); named here too for the
# sinks that import them with the dispatcher.
__all__ = ["MAX_ATTEMPTS", "DeliveryError", "Dispatcher", "Sink"]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 8


@dataclass(slots=True)
class _Claim:
    """A claimed batch: its message ids, when it was claimed and how long it is held (on the
    injected clock, as the store's claim: renewed by the heartbeat)."""

    ids: list[int]
    claimed_at: datetime
    until: datetime


class Dispatcher(BackgroundLoop):
    task_name = "signoff-outbox"

    def __init__(
        self,
        store: OutboxStore,
        clock: Clock,
        sinks: Mapping[str, Sink],
        *,
        owner: str,
        poll_seconds: float = 1.0,
        batch: int = 200,
        hold: timedelta = timedelta(seconds=30),
    ) -> None:
        self.store = store
        self.clock = clock
        self.sinks = dict(sinks)
        self.owner = owner
        self.poll_seconds = poll_seconds
        self.batch = batch
        self.hold = hold  # how long a claim keeps other dispatchers off a message
        self._wakeup = asyncio.Event()
        self._wakes = 0
        self._last_sent: dict[str, float] = {}  # channel -> loop time of the last send

    def wake(self) -> None:
        self._wakes += 1  # a channel sending a batch checks for card updates after a wake-up
        self._wakeup.set()

    async def _loop(self) -> None:
        while True:
            self._wakeup.clear()
            began = self.clock.now()
            try:
                handled = await self.deliver_due()
            except SignoffError as exc:
                log.warning("outbox delivery failed: %s", exc)
                handled = 0
            if handled:
                continue
            # The next poll: ``poll_seconds`` on the clock after this one began (a clock moved
            # on meanwhile polls again at once), unless woken first.
            took = (self.clock.now() - began).total_seconds()
            await wait_or_timeout(self.clock, self._wakeup, self.poll_seconds - took)

    async def deliver_due(self) -> int:
        """Deliver what is due now; returns how many messages were handled."""
        claimed_at = self.clock.now()  # no later than the claim's start
        claimed = await self.store.claim_outbox(
            self.owner, self.clock.now(), limit=self.batch, hold=self.hold
        )
        if not claimed:
            return 0
        by_channel: dict[str, list[OutboxRecord]] = {}
        for message in claimed:
            by_channel.setdefault(message.channel, []).append(message)
        claim = _Claim([m.id for m in claimed], claimed_at, claimed_at + self.hold)
        renewal = asyncio.create_task(self._renew(claim))
        try:
            await asyncio.gather(
                *(self._channel(ch, msgs, claim) for ch, msgs in by_channel.items())
            )
        finally:
            await cancel_and_wait(renewal)
        return len(claimed)

    async def _renew(self, claim: _Claim) -> None:
        """The claim's heartbeat, like a run's lease: renewed every third of the hold while
        the batch is being sent, so a slow remote cannot let it lapse under a live sender."""
        while True:
            await self.clock.sleep(max(self.hold.total_seconds() / 3, 0.05))
            until = self.clock.now() + self.hold
            try:
                await self.store.renew_claims(claim.ids, self.owner, until)
            except SignoffError as exc:
                log.warning("renewing outbox claims failed: %s", exc)
            else:
                claim.until = until

    async def _channel(self, channel: str, messages: list[OutboxRecord], claim: _Claim) -> None:
        """Send one channel's claimed messages in order. A message is only started in the
        first half of the first hold: the rest is handed back then, for a fair share."""
        platform = channel.partition(":")[0]
        sink = self.sinks.get(platform)
        loop = asyncio.get_running_loop()
        wakes = self._wakes
        for index, message in enumerate(messages):
            if index and self._wakes != wakes and not is_urgent(message):
                wakes = self._wakes  # asked once per wake-up, not once per message
                if await self._update_waiting(channel):
                    await self.store.release_claims([m.id for m in messages[index:]], self.owner)
                    return
            if sink is not None:
                await self._pace(channel, sink.min_interval)
            if self.clock.now() > claim.claimed_at + self.hold / 2:
                # Paced sends took half the claim: hand the rest back before the claim lapses,
                # so no other dispatcher can claim a message this one is still sending.
                await self.store.release_claims([m.id for m in messages[index:]], self.owner)
                return
            if sink is None:
                await self.store.mark_failed(message.id, f"no delivery configured for {platform}")
                continue
            try:
                await sink.deliver(message)
            except Exception as exc:
                if not isinstance(exc, DeliveryError):  # a sink bug must not stop the others
                    log.exception("delivering outbox message %s failed", message.id)
                    exc = DeliveryError(f"{type(exc).__name__}: {exc}")
                self._last_sent[channel] = loop.time()
                retry_at = await self._failed(message, exc)
                # The channel's later messages wait as long as this one: they keep their order
                # and nothing is sent while the remote said to wait.
                for later in messages[index + 1 :]:
                    if retry_at is None:
                        await self.store.release_claims([later.id], self.owner)
                    else:
                        await self.store.mark_retry(
                            later.id,
                            self.owner,
                            retry_at,
                            "held behind an earlier message",
                            count=False,
                        )
                return
            self._last_sent[channel] = loop.time()
            if self.clock.now() > claim.until:  # the claim lapsed (renewals failed) under the send
                log.warning(
                    "outbox message %s was delivered after its claim lapsed (the claim could "
                    "not be renewed): another replica may have sent it too",
                    message.id,
                )
            await self.store.mark_sent(message.id, self.owner, self.clock.now())

    async def _update_waiting(self, channel: str) -> bool:
        """Whether a card update for ``channel`` was queued since this batch was claimed (asked
        of the store only after a wake-up: something new was queued)."""
        try:
            return await self.store.urgent_due(channel, self.clock.now())
        except SignoffError as exc:
            log.warning("checking the outbox for card updates failed: %s", exc)
            return False

    async def _pace(self, channel: str, min_interval: float) -> None:
        last = self._last_sent.get(channel)
        if last is None or min_interval <= 0:
            return
        wait = last + min_interval - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)

    async def _failed(self, message: OutboxRecord, exc: DeliveryError) -> datetime | None:
        """Record a failed attempt; returns when it will be retried (None: given up)."""
        throttled = exc.retry_after is not None and not exc.permanent
        attempts = message.attempts + (0 if throttled else 1)
        if exc.permanent or attempts >= MAX_ATTEMPTS:
            log.warning("giving up on outbox message %s: %s", message.id, exc)
            await self.store.mark_failed(message.id, str(exc))
            return None
        # "Wait N seconds" is the remote pacing us, not the message failing: it does not use up
        # an attempt.
        delay = exc.retry_after if exc.retry_after is not None else min(2.0**attempts, 300.0)
        at = self.clock.now() + timedelta(seconds=delay)
        await self.store.mark_retry(message.id, self.owner, at, str(exc), count=not throttled)
        return at
