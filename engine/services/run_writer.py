"""How a replay writes to its run: the events it collects go to the journal in the
transaction of the next commit point (a durable ``step_started``, a park, the end), fenced by
the worker's lease; a sequence number other than the expected one means someone else appended,
and the walk starts over to see it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from engine.domain import notify
from engine.domain.model import JournalEvent, NewEvent, Node, OutboxMessage, Run, RunStatus
from engine.domain.replay import StepHistory, brief
from engine.services.context import Services
from engine.services.steps import callback_message

T = TypeVar("T")


class Restart(Exception):
    """The journal changed under us; replay from the start."""


class RunWriter:
    """The writing half of a replay (``engine.services.interpreter``): pending events and chat
    messages, and the commit points that write them."""

    def __init__(self, services: Services, run: Run, owner: str, next_seq: int) -> None:
        self.s = services
        self.run = run
        self.owner = owner
        self.next_seq = next_seq
        self.pending: list[NewEvent] = []
        self.outbox: list[OutboxMessage] = []
        self.notify_channels: tuple[str, ...] = ()

    def open_requests(self) -> bool:
        """Whether the journal this replay read holds a request still undecided (one whose
        step the run never reached, when it ends)."""
        return False

    async def _hand_back(self) -> RunStatus:
        """Shutting down between steps: record what is done, give the run back to the queue
        (another process, or this one after a restart, goes on from here)."""
        await self._commit([])
        await self.s.store.requeue_run(self.run.id, self.owner, self.s.clock.now())
        return RunStatus.QUEUED

    def _is_started(self, node: Node, step: StepHistory) -> bool:
        return step.started is not None or any(
            e.event == JournalEvent.STEP_STARTED and e.step_id == node.id for e in self.pending
        )

    def _started(self, node: Node, **data: Any) -> NewEvent:
        return NewEvent(JournalEvent.STEP_STARTED, node.id, {"nodeType": node.type.value, **data})

    async def _commit(self, events: list[NewEvent], **kwargs: Any) -> None:
        batch = self.pending + events
        outbox, self.outbox = self.outbox, []
        self.pending = []
        if not batch and not outbox and not kwargs:
            return
        first = await self._persist(
            lambda: self.s.store.append_events(
                self.run.id,
                self.owner,
                batch,
                self.s.clock.now(),
                outbox=outbox,
                expect=self.next_seq,
                **kwargs,
            )
        )
        if outbox:
            self.s.wake_outbox()
        self._check_seq(first, len(batch))

    async def _park(self, events: list[NewEvent], **kwargs: Any) -> None:
        batch = self.pending + events
        # A parked step's card goes before the notices queued with it (the confidence
        # evaluation): in each channel the card starts the run's thread.
        outbox = list(kwargs.pop("outbox", ())) + self.outbox
        self.pending, self.outbox = [], []
        # A park tried again after its commit did happen is refused (the run waits): nothing
        # twice.
        first = await self._persist(
            lambda: self.s.store.park_run(
                self.run.id, self.owner, batch, self.s.clock.now(), outbox=outbox, **kwargs
            )
        )
        if outbox:
            self.s.wake_outbox()
        self._check_seq(first, len(batch))

    async def _persist(self, write: Callable[[], Awaitable[T]]) -> T:
        """``write``, outlasting a database outage for up to a lease. What it commits may be
        the result of a step already called: giving up at once would leave the step to be
        called again when the lease runs out (a side effect twice, if with the same key). An
        attempt whose commit happened unseen is not applied twice (``append_events``'
        ``expect``; a park is refused)."""
        return await self.s.store.outlast_outage(
            write,
            seconds=self.s.lease_seconds,
            stopping=self.s.stopping,
            what=f"run {self.run.id}: a commit",
        )

    def _check_seq(self, first: int, count: int) -> None:
        if first != self.next_seq:
            raise Restart()  # someone else appended: our events stand, but replay to see theirs
        self.next_seq += count

    async def fail(
        self,
        node: Node | None,
        error: str,
        *,
        step_failed: bool = False,
        attempt: int | None = None,
    ) -> RunStatus | None:
        events = []
        if node is not None and step_failed:
            events.append(
                NewEvent(
                    JournalEvent.STEP_FAILED,
                    node.id,
                    {"error": error, "final": True, "attempt": attempt},
                )
            )
        events.append(
            NewEvent(JournalEvent.RUN_FAILED, node.id if node else None, {"error": error})
        )
        if node is not None and self.notify_channels:
            self.outbox += notify.notice(
                self.notify_channels,
                self.run.id,
                "step_result",
                f"{self.run.id}:{node.id}",
                {"runId": self.run.id, "stepId": node.id, "ok": False, "error": error},
            )
        return await self._finish(RunStatus.FAILED, error=error, events=events)

    async def _finish(
        self,
        status: RunStatus,
        *,
        output: Any = None,
        error: str | None = None,
        events: list[NewEvent] | None = None,
    ) -> RunStatus | None:
        if events is None:
            events = [NewEvent(JournalEvent.RUN_COMPLETED, data={"output": brief(output)})]
        wakeup = None
        if self.run.parent_run_id:
            wakeup = (
                self.run.parent_run_id,
                NewEvent(
                    JournalEvent.RUN_RESUMED,
                    self.run.parent_step_id,
                    {"childRunId": self.run.id, "childStatus": status.value},
                ),
            )
        self.outbox += callback_message(self.run, status)  # queued with the outcome it announces
        open_requests = self.open_requests()
        try:
            await self._commit(
                events,
                finish=status,
                output=output,
                error=error,
                parent_wakeup=wakeup,
                open_requests=open_requests,
            )
        except Restart:
            # Someone appended meanwhile (a takeover request): the end cancelled it, and its
            # card changes now.
            self.s.wake_outbox()
            raise
        if open_requests:
            self.s.wake_outbox()
        if wakeup is not None:
            self.s.wake()
        return status
