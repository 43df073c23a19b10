"""Outbox claims follow ``server.leaseSeconds``: a replica that dies while delivering leaves its
claimed messages to the other replicas for exactly as long as it leaves them its runs.

* a message claimed by a dispatcher that then dies is not delivered by another replica's
  dispatcher before the lease has run out, and is delivered by it right after;
* a live dispatcher hands back what it has not sent once half its hold has passed, so a claim
  never lapses under a message it is still working through.

Time is the engines' injected ``ManualClock``: nothing here sleeps for a lease.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from engine.assembly import Engine
from engine.domain.model import OutboxRecord
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, make_engine, wait_for
from tests.support.waiting import until

LEASE_SECONDS = 12
FLOW = """
pay:
  nodes:
    - {id: approve, type: approval, approvers: [bob], channels: ["teams:ops"]}
    - {id: act, type: connector, connector: demo-ledger, action: note, args: {text: hi}}
"""


class Recorder:
    """A sink that delivers at once and remembers what it delivered."""

    min_interval = 0.0

    def __init__(self) -> None:
        self.delivered: list[OutboxRecord] = []

    async def deliver(self, message: OutboxRecord) -> None:
        self.delivered.append(message)


class Hung(Recorder):
    """A sink whose remote never answers: the dispatcher is inside ``deliver`` when it dies."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()

    async def deliver(self, message: OutboxRecord) -> None:
        self.entered.set()
        await asyncio.Event().wait()


def replica(db_url: str, clock: ManualClock, name: str, sink: Recorder) -> Engine:
    return make_engine(
        db_url,
        FLOW,
        clock=clock,
        name=name,
        sinks={"teams": sink},
        server=f"{{workers: 4, leaseSeconds: {LEASE_SECONDS}, pollSeconds: 0.05}}",
    )


async def test_a_dead_dispatchers_claim_lapses_after_the_lease(migrated_db_url: str) -> None:
    clock = ManualClock()
    hung, recorder = Hung(), Recorder()
    dying = replica(migrated_db_url, clock, "a", hung)
    survivor = replica(migrated_db_url, clock, "b", recorder)
    assert dying.dispatcher.hold == timedelta(seconds=LEASE_SECONDS)
    try:
        await dying.start()
        await dying.runs.start_run("pay", {}, AGENT)
        await asyncio.wait_for(hung.entered.wait(), 10)  # the card is claimed and being sent
        await dying.dispatcher.stop()  # the process dies mid-send: nothing is marked or released
        ((card, status, _),) = await survivor.store.outbox_messages()
        assert (card.kind, status) == ("card", "pending")
        claimed_at = clock.now()

        clock.set(claimed_at + timedelta(seconds=LEASE_SECONDS - 1))
        assert await survivor.dispatcher.deliver_due() == 0  # still the dead replica's
        clock.set(claimed_at + timedelta(seconds=LEASE_SECONDS))
        assert await survivor.dispatcher.deliver_due() == 0  # the claim ends only after this
        clock.set(claimed_at + timedelta(seconds=LEASE_SECONDS, milliseconds=1))
        assert await survivor.dispatcher.deliver_due() == 1
        assert [m.id for m in recorder.delivered] == [card.id]
        ((_, status, _),) = await survivor.store.outbox_messages()
        assert status == "sent"
    finally:
        await dying.stop()
        await survivor.stop()


class Unhurried(Recorder):
    """A remote each send to which takes 0.3 s of the engines' clock."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock

    async def deliver(self, message: OutboxRecord) -> None:
        await super().deliver(message)
        self.clock.advance(seconds=0.3)


async def test_unsent_messages_are_handed_back_before_half_the_hold(
    migrated_db_url: str,
) -> None:
    """Sends into one channel stop at half the hold (on the engines' clock); the rest is
    handed back unclaimed, ready for the next round, never left to lapse under a live
    dispatcher."""
    clock = ManualClock()
    paced = Unhurried(clock)
    engine = replica(migrated_db_url, clock, "a", paced)
    engine.dispatcher.hold = timedelta(seconds=1)  # sends stop 0.5 s after the claim
    try:
        await engine.start()
        await engine.dispatcher.stop()  # this test delivers by hand
        for i in range(5):
            await engine.runs.start_run("pay", {"n": i}, AGENT)

        async def five_cards() -> bool:
            return len(await engine.store.outbox_messages()) == 5

        await wait_for(five_cards)
        assert await engine.dispatcher.deliver_due() == 5
        rows = await engine.store.outbox_messages()
        sent = [m for m, status, _ in rows if status == "sent"]
        assert 1 <= len(sent) < 5, rows  # sent at 0 and 0.3 s; the next would go at 0.6 s
        assert [m.id for m in paced.delivered] == [m.id for m in sent]
        # The rest is claimable again at once, by this dispatcher or any other.
        assert await engine.dispatcher.deliver_due() == 5 - len(sent)
    finally:
        await engine.stop()


class Slow(Hung):
    """A remote that answers only when told to."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()

    async def deliver(self, message: OutboxRecord) -> None:
        self.entered.set()
        await self.answer.wait()
        self.delivered.append(message)


async def test_a_live_dispatcher_renews_its_claim_while_the_remote_is_slow(
    migrated_db_url: str,
) -> None:
    """The claim's heartbeat: a send that outlasts the hold keeps its claim, so no other
    replica sends the same card while the first is still waiting for the remote."""
    clock = ManualClock()
    slow, recorder = Slow(), Recorder()
    sender = replica(migrated_db_url, clock, "a", slow)
    other = replica(migrated_db_url, clock, "b", recorder)
    sender.dispatcher.hold = timedelta(seconds=0.3)  # renewed every 0.1 s of the clock
    try:
        await sender.start()
        await sender.runs.start_run("pay", {}, AGENT)
        await asyncio.wait_for(slow.entered.wait(), 10)
        claimed_at = clock.now()

        def heartbeat_asleep() -> bool:  # the other timers sleep a second or more
            return any(0 < left < 0.5 for left in clock.sleepers)

        await until(heartbeat_asleep, what="the heartbeat asleep")
        clock.set(claimed_at + timedelta(seconds=60))  # far past the first hold
        # The move wakes the heartbeat; asleep again, it has renewed: held until 60.3 s.
        await until(heartbeat_asleep, what="a beat")
        assert await other.dispatcher.deliver_due() == 0
        slow.answer.set()

        async def sent() -> bool:
            return [s for _, s, _ in await sender.store.outbox_messages()] == ["sent"]

        await wait_for(sent)
        assert len(slow.delivered) == 1 and recorder.delivered == []
    finally:
        await sender.stop()
        await other.stop()
