"""Workers: claim queued runs with a lease and advance them; sweep expired requests.

Concurrency is bounded per process. A run in ``waiting`` holds no task, no coroutine and no
lease: only runs being advanced right now have a task here. The leases of the runs being
advanced are renewed together, every third of the lease on the injected clock, by one task of
the process (a failed renewal is tried again 50 ms later); a process that dies stops renewing,
and another takes the run over when the lease runs out (the journal fences the old owner out:
its writes are refused).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta

from engine.background import BackgroundLoop, cancel_and_wait
from engine.domain.errors import SignoffError
from engine.domain.records import Adopt, OutboxFor
from engine.ports import Clock
from engine.ports.store import Store
from engine.services import crashpoints, reminders
from engine.services.interpreter import Interpreter, Written
from engine.services.timers import wait_or_timeout

log = logging.getLogger(__name__)

_RENEW_AGAIN_SECONDS = 0.05  # after a failed renewal of the leases
# The longest a decision waits for a slot (``Workers.offer_soon``). At 0.1 s, a burst of 64
# decisions in flight on 64 slots queued some runs, and queued runs waited behind the claims:
# the burst's p99 release-to-act was 1.2-1.7 s; at 1 s it was 130-160 ms, at the same rate
# (bench/peers.py signoff-http, 4,000 runs). A slot frees every few milliseconds under load.
OFFER_WAIT_SECONDS = 1.0


class Workers:
    def __init__(
        self,
        store: Store,
        interpreter: Interpreter,
        clock: Clock,
        *,
        owner: str,
        concurrency: int = 8,
        lease: timedelta = timedelta(seconds=30),
        poll_seconds: float = 2.0,
    ) -> None:
        self.store = store
        self.interpreter = interpreter
        self.clock = clock
        self.owner = owner
        self.concurrency = concurrency
        self.lease = lease
        self.poll_seconds = poll_seconds
        self._wakeup = asyncio.Event()
        self._active: set[asyncio.Task[None]] = set()
        self._reserved = 0
        self._more_queued = True  # the last claim may have left ready runs behind
        self._loop_task: asyncio.Task[None] | None = None
        self._renewer: asyncio.Task[None] | None = None
        self._advancing: set[str] = set()  # the runs whose leases the renewer keeps
        self._reclaimed: set[str] = set()  # claimed again while a task here advanced them
        self._slot_waiters: deque[asyncio.Future[None]] = deque()  # ``offer_soon``, in order
        self._stopping = False

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def active(self) -> int:
        return len(self._active)

    def wake(self) -> None:
        """Something became ready: claim now rather than at the next poll."""
        self._more_queued = True
        self._wakeup.set()

    def offer(self) -> Adopt | None:
        """A free slot for a run that a transaction of this process is about to put back to
        work (a new run, a decision): the run is claimed for this process in that transaction
        and advanced here at once, with no queue round trip, wake-up or claim. ``settle``
        must follow, whatever the transaction's outcome."""
        busy = len(self._active) + self._reserved
        if self._stopping or self._loop_task is None or busy >= self.concurrency:
            return None
        self._reserved += 1
        return Adopt(self.owner, self.clock.now() + self.lease, plan=self.interpreter.resume_plan)

    async def offer_soon(
        self, seconds: float = OFFER_WAIT_SECONDS, *, paced: bool = False
    ) -> Adopt | None:
        """``offer``; with every slot busy, the first slot freed within ``seconds``, unless
        queued runs are known to wait for slots (they come first: a decision that finds none
        queues its run behind them). Under a burst of decisions a slot frees every few
        milliseconds, and a decision that takes one skips the queue: without it, its run is
        queued and claimed in another transaction, which appends the resumed step's start
        again (bench/peers.py, 32 decisions at a time on 32 slots: the burst resumed 2,000
        runs/s without the wait, 3,064 with it). Whoever waits is told when a slot frees, in
        turn; ``None`` once the time is up or the workers stop.

        ``paced`` (a new run): behind queued runs it waits all the same, until a slot frees
        (or the time is up), and leaves that slot to them: its run is queued no faster than
        the workers take runs on, so a flood of starts cannot run ahead of them."""
        offer = self.offer()
        if offer is not None or self._stopping or self._loop_task is None:
            return offer
        if self._more_queued and not paced:
            return None
        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            behind_queued = self._more_queued
            if not await self._slot_freed_before(deadline, keep=not behind_queued):
                return None
            if behind_queued:
                return None  # the slot is the queued runs' (the claim ``_done`` wakes takes it)
            offer = self.offer()
            if offer is not None or self._stopping:
                return offer
            if self._more_queued and not paced:
                return None

    async def _slot_freed_before(self, deadline: float, *, keep: bool) -> bool:
        """Wait in turn to be told of a freed slot; False once ``deadline`` (loop time) passes.
        A waiter told just as it leaves passes the news on when it would have ``keep`` the
        slot (one that was only pacing has nothing to pass on)."""
        freed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(freed)
        try:
            async with asyncio.timeout_at(deadline):
                await freed
        except BaseException as exc:
            if freed.done() and not freed.cancelled():
                if keep:
                    self._slot_freed()  # told, but leaving: the next in turn is told instead
            else:
                with contextlib.suppress(ValueError):
                    self._slot_waiters.remove(freed)
            if isinstance(exc, TimeoutError):
                return False
            raise
        return True

    @property
    def waits_for_slots(self) -> bool:
        """Whether a decision that finds every slot busy would wait for one (``offer_soon``):
        the workers run, and their last claim with a slot free left no ready run behind."""
        return not (self._stopping or self._loop_task is None or self._more_queued)

    def settle(self, offer: Adopt | None) -> None:
        """After the transaction: advance the run it claimed, or free the slot."""
        if offer is None:
            return
        self._reserved -= 1
        if offer.run_id is not None:
            self._spawn(offer.run_id, offer.written)
        else:
            self._slot_freed()
            self._wakeup.set()

    def _slot_freed(self) -> None:
        """Tell the first decision still waiting for a slot (``offer_soon``)."""
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def start(self) -> None:
        self._stopping = False
        self._loop_task = asyncio.create_task(self._loop(), name=f"signoff-workers-{self.owner}")
        self._renewer = asyncio.create_task(
            self._renew_leases(), name=f"signoff-leases-{self.owner}"
        )

    async def stop(self, grace_seconds: float = 10.0) -> None:
        """Stop claiming; let in-flight runs reach a commit point, then give the rest back."""
        self._stopping = True
        self._wakeup.set()
        while self._slot_waiters:  # no slot for them now: their runs go to the queue at once
            self._slot_freed()
        if self._loop_task is not None:
            await cancel_and_wait(self._loop_task)
        if self._active:
            _, still = await asyncio.wait(self._active, timeout=grace_seconds)
            for task in still:
                task.cancel()
            if still:
                await asyncio.gather(*still, return_exceptions=True)
        if self._renewer is not None:  # last: in-flight runs keep their leases until done
            await cancel_and_wait(self._renewer)

    async def _loop(self) -> None:
        while not self._stopping:
            self._wakeup.clear()
            began = self.clock.now()
            claimed = 0
            free = self.concurrency - len(self._active) - self._reserved
            if free > 0:
                written: dict[str, Written] = {}
                try:
                    ids = await self.store.claim_runs(
                        self.owner,
                        self.clock.now(),
                        self.lease,
                        free,
                        read=written,
                        plan=self.interpreter.resume_plan,
                    )
                except SignoffError as exc:
                    log.warning("claiming runs failed: %s", exc)
                    ids = []
                claimed = len(ids)
                for run_id in ids:
                    self._spawn(run_id, written.get(run_id))
                # A full batch may have left ready runs behind; fewer than asked for, none was
                # (with no slot free, nothing is learnt: ``wake`` says when runs become ready).
                self._more_queued = claimed >= free
            if claimed and claimed == free:
                await asyncio.sleep(0)  # more may be waiting: claim again once a slot frees
                if len(self._active) >= self.concurrency:
                    await self._wait(began)
                continue
            # Fewer than asked for: nothing else was ready. A wake-up that came during the
            # claim is still set, so the wait below returns at once for it.
            await self._wait(began)

    def _spawn(self, run_id: str, written: Written | None = None) -> None:
        if run_id in self._advancing:
            # Claimed again though a task here still advances it: its lease ran out under
            # that task (renewals failed meanwhile), and the claim renewed it for this
            # process. That task goes on under the renewed lease; a second one would replay
            # the step in flight as interrupted and call it again. Once that task ends (it
            # may have been fenced out by another replica's claim in between), the run is
            # advanced again from what was committed.
            log.warning("run %s: lease renewed under the task still advancing it", run_id)
            self._reclaimed.add(run_id)
            return
        self._advancing.add(run_id)
        task = asyncio.create_task(self._advance(run_id, written), name=f"run-{run_id}")
        self._active.add(task)
        task.add_done_callback(functools.partial(self._done, run_id))

    def _done(self, run_id: str, task: asyncio.Task[None]) -> None:
        """A run's task ended (a task cancelled before it started too)."""
        self._active.discard(task)
        self._advancing.discard(run_id)
        if run_id in self._reclaimed:
            self._reclaimed.discard(run_id)
            if not self._stopping:
                self._spawn(run_id)
        self._slot_freed()
        if self._more_queued:
            self._wakeup.set()  # a free slot, and runs may be waiting for one: claim

    async def _wait(self, began: datetime) -> None:
        """Until a wake-up, or the next poll: ``poll_seconds`` on the clock after the claim
        that began at ``began`` (a clock moved on during the claim polls again at once)."""
        took = (self.clock.now() - began).total_seconds()
        await wait_or_timeout(self.clock, self._wakeup, self.poll_seconds - took)

    async def _advance(self, run_id: str, written: Written | None) -> None:
        try:
            await self._advance_again_on_outage(run_id, written)
        except asyncio.CancelledError:
            raise
        except SignoffError as exc:
            log.warning("run %s: %s (the lease will hand it to another attempt)", run_id, exc)
        except Exception:
            log.exception("run %s: unexpected error (the lease will hand it on)", run_id)

    async def _advance_again_on_outage(self, run_id: str, written: Written | None) -> None:
        """``interpreter.advance``; when our own database fails it (a step's write to it, a
        commit that outlasted its retries), the run is advanced again from what was committed,
        for up to a lease. Waiting for the lease to run out would only delay it, and failing
        the run for our database's outage would be wrong. A step cut short that way is called
        again with the same key, as after a crash."""

        async def advance() -> None:
            nonlocal written
            # Only the first attempt starts from what it was handed: a second reads the run
            # again, as what the failed attempt committed is unknown.
            given, written = written, None
            await self.interpreter.advance(run_id, self.owner, given)

        await self.store.outlast_outage(
            advance,
            seconds=self.lease.total_seconds(),
            stopping=lambda: self.stopping,
            what=f"run {run_id}",
        )

    async def _renew_leases(self) -> None:
        """Every third of the lease, renew the leases of the runs being advanced, in one
        statement. A run's claim set its lease a whole lease ahead, so it is renewed before
        it runs out whenever in the beat it started. A failed renewal is tried again almost at
        once (``transact`` backs off between its own attempts), not a beat later."""
        while True:
            await self.clock.sleep(max(self.lease.total_seconds() / 3, 0.05))
            while self._advancing:
                try:
                    await self.store.renew_leases(
                        list(self._advancing), self.owner, self.clock.now() + self.lease
                    )
                    break
                except SignoffError as exc:
                    log.warning("renewing %d leases failed: %s", len(self._advancing), exc)
                    await self.clock.sleep(_RENEW_AGAIN_SECONDS)


class Sweeper(BackgroundLoop):
    """Expires pending requests past ``expiresAt``, exactly once even with several replicas."""

    task_name = "signoff-sweeper"

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        on_requeue: Callable[[], None] | None = None,
        outbox: OutboxFor | None = None,
        interval_seconds: float = 1.0,
        batch: int = 1000,
        drains: int = 1,
    ) -> None:
        self.store = store
        self.clock = clock
        self.on_requeue = on_requeue
        self.outbox = outbox
        # ``outbox`` is called inside the expiry transaction: the reliability suite's ``sweep``
        # crash point (engine/services/crashpoints.py) kills the process there, before the commit.
        self._expiry_outbox = None if outbox is None else crashpoints.hooked("sweep", outbox)
        self.interval = interval_seconds
        # A batch is one transaction: 1,000 holds SQLite's writer about 60 ms, and expires a
        # backlog of 100,000 in about 6 s (bench/sweep.py); the engine gives PostgreSQL 2,000.
        self.batch = batch
        # Batches taken ``drains`` at a time, each on its own connection: while PostgreSQL
        # executes one batch's statement this process turns the other's rows into requests
        # and card messages (bench/sweep.py). Each batch locks only its own rows (SKIP LOCKED).
        self.drains = drains

    async def sweep_once(self) -> int:
        """Expire everything due now; returns how many requests expired."""
        await reminders.sweep(self.store, self.clock, self.on_requeue)  # before they expire
        # Every drain ends before a failure is raised: none goes on unwatched.
        counts = await asyncio.gather(
            *(self._drain() for _ in range(self.drains)), return_exceptions=True
        )
        for count in counts:
            if isinstance(count, BaseException):
                raise count
        return sum(counts)  # type: ignore[arg-type]

    async def _drain(self) -> int:
        total = 0
        while True:
            expired = await self.store.expire_due(
                self.clock.now(), limit=self.batch, outbox=self._expiry_outbox
            )
            if expired:
                crashpoints.reached("swept")
            total += len(expired)
            if expired and self.on_requeue is not None:
                self.on_requeue()
            if len(expired) < self.batch:
                return total

    async def _loop(self) -> None:
        while True:
            began = self.clock.now()
            try:
                await self.sweep_once()
            except SignoffError as exc:
                log.warning("sweep failed: %s", exc)
            # Every ``interval`` on the clock, counted from the sweep's start: a clock moved
            # on during a sweep (a test's manual clock) is swept again at once.
            took = (self.clock.now() - began).total_seconds()
            await self.clock.sleep(self.interval - took)
