"""Runs and their journal: create, read, append (fenced by the lease), park, finish. Claiming
runs and their leases are ``engine.adapters.store.leases``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase, insert_outbox
from engine.adapters.store.db import mark_ready
from engine.adapters.store.journal import (
    FAST_INSERT_JOURNAL,
    Guard,
    append_journal,
    read_run_and_journal,
)
from engine.adapters.store.outcomes import decide_open
from engine.adapters.store.rows import (
    FAST_INSERT_RUN,
    FAST_INSERT_TAKEOVER,
    journal_from_row,
    run_from_row,
    takeover_values,
)
from engine.domain import decisions
from engine.domain.decisions import Outcome
from engine.domain.errors import AlreadyAppended, NotFound, TransitionRefused
from engine.domain.model import (
    JournalEntry,
    JournalEvent,
    NewEvent,
    OutboxMessage,
    Run,
    RunStatus,
    TakeoverRequest,
)
from engine.domain.records import NewRun


class RunStore(StoreBase):
    async def create_run(
        self,
        new: NewRun,
        now: datetime,
        events: Sequence[NewEvent] = (),
        *,
        takeover: TakeoverRequest | None = None,
        outbox: Sequence[OutboxMessage] = (),
    ) -> tuple[Run, bool]:
        """Insert a run with its ``run_started`` event (and ``events``; a held call is created
        parked, with its takeover request). With an idempotency key already used, returns the
        existing run and ``False``."""

        def work(conn: Connection) -> tuple[Run, bool]:
            journal = _insert_run(conn, self, new, now, events)
            created = journal is not None
            if created and takeover is not None:
                FAST_INSERT_TAKEOVER(conn, takeover_values(takeover))
            if created:
                insert_outbox(conn, self, outbox, now)
            if not created:
                row = (
                    (
                        conn.execute(
                            select(t.runs).where(t.runs.c.idempotency_key == new.idempotency_key)
                        )
                    )
                    .mappings()
                    .one()
                )
                return run_from_row(row), False
            run = run_from_row(_run_values(new, now, next_seq=0) | _NOT_ENDED)
            if new.adopt is not None and journal is not None:
                new.adopt.written = (run, journal)
            return run, True

        return await self.db.transact(work)

    async def get_run(self, run_id: str) -> Run:
        def work(conn: Connection) -> Run:
            row = (
                (conn.execute(select(t.runs).where(t.runs.c.id == run_id))).mappings().one_or_none()
            )
            if row is None:
                raise NotFound(f"run {run_id} not found", run_id=run_id)
            return run_from_row(row)

        return await self.db.transact(work, write=False)

    async def list_runs(
        self, *, status: RunStatus | None = None, workflow: str | None = None, limit: int = 100
    ) -> list[Run]:
        def work(conn: Connection) -> list[Run]:
            q = select(t.runs).order_by(t.runs.c.created_at.desc()).limit(limit)
            if status is not None:
                q = q.where(t.runs.c.status == status.value)
            if workflow is not None:
                q = q.where(t.runs.c.workflow == workflow)
            return [run_from_row(r) for r in (conn.execute(q)).mappings()]

        return await self.db.transact(work, write=False)

    async def count_runs(self, status: RunStatus) -> int:
        def work(conn: Connection) -> int:
            from sqlalchemy import func

            q = select(func.count()).select_from(t.runs).where(t.runs.c.status == status.value)
            return int((conn.execute(q)).scalar_one())

        return await self.db.transact(work, write=False)

    async def journal(self, run_id: str) -> list[JournalEntry]:
        def work(conn: Connection) -> list[JournalEntry]:
            q = select(t.journal).where(t.journal.c.run_id == run_id).order_by(t.journal.c.seq)
            return [journal_from_row(r) for r in (conn.execute(q)).mappings()]

        return await self.db.transact(work, write=False)

    async def run_and_journal(self, run_id: str) -> tuple[Run, list[JournalEntry]]:
        """A run and its whole journal, read together (what a worker replays)."""

        def work(conn: Connection) -> tuple[Run, list[JournalEntry]]:
            return read_run_and_journal(conn, run_id)

        return await self.db.transact(work, write=False)

    async def append_events(
        self,
        run_id: str,
        owner: str,
        events: Sequence[NewEvent],
        now: datetime,
        *,
        finish: RunStatus | None = None,
        output: Any = None,
        error: str | None = None,
        outbox: Sequence[OutboxMessage] = (),
        parent_wakeup: tuple[str, NewEvent] | None = None,
        expect: int | None = None,
        open_requests: bool = False,
    ) -> int:
        """Append events as the lease holder (fenced: a worker that lost its lease is refused).
        ``finish`` ends the run (completed/failed) in the same transaction, and wakes its parent
        run when it has one. Returns the first sequence number appended. ``expect``: the
        first sequence number the caller expects; an attempt whose commit was lost to the
        caller but happened is not appended again (``append_journal``).

        A run that ends with takeover requests still open (an operator's, for a step the run
        never reached) cancels them in the same transaction (``decisions.unreached``), with their
        card updates: when the caller knows of one (``open_requests``), or when someone appended
        meanwhile (a request made while the last step ran). Only then: no extra statement
        for the runs that end with nothing open."""

        def work(conn: Connection) -> int:
            values: dict[str, Any] = {}
            if finish is not None:
                values = {
                    "status": finish.value,
                    "lease_owner": None,
                    "lease_expires_at": None,
                    "output": output,
                    "error": error,
                }
            first = append_journal(
                conn,
                run_id,
                events,
                now,
                guard=Guard.LEASE,
                owner=owner,
                values=values,
                refused="the run's lease is held by another worker or the run has ended",
                expect=expect,
            )
            if parent_wakeup is not None:
                parent_id, parent_event = parent_wakeup
                _wake_parent(conn, parent_id, parent_event, now)
            closed: list[Outcome] = []
            if finish is not None and (open_requests or (expect is not None and first != expect)):
                closed = _cancel_unreached(conn, run_id, now)
            insert_outbox(conn, self, [*outbox, *(m for c in closed for m in c.outbox)], now)
            return first

        try:
            return await self.db.transact(work)
        except AlreadyAppended as landed:
            return landed.first

    async def park_run(
        self,
        run_id: str,
        owner: str,
        events: Sequence[NewEvent],
        now: datetime,
        *,
        takeover: TakeoverRequest | None = None,
        child: NewRun | None = None,
        child_events: Sequence[NewEvent] = (),
        outbox: Sequence[OutboxMessage] = (),
    ) -> int:
        """Move a running run to ``waiting`` and give up its lease, creating the takeover
        request or the child run it waits for, all in one transaction."""

        def work(conn: Connection) -> int:
            first = append_journal(
                conn,
                run_id,
                events,
                now,
                guard=Guard.LEASE,
                owner=owner,
                values={
                    "status": RunStatus.WAITING.value,
                    "lease_owner": None,
                    "lease_expires_at": None,
                },
                refused="the run's lease is held by another worker or the run has ended",
            )
            if takeover is not None:
                FAST_INSERT_TAKEOVER(conn, takeover_values(takeover))
            if child is not None:
                _insert_run(conn, self, child, now, child_events)
            insert_outbox(conn, self, outbox, now)
            return first

        return await self.db.transact(work)

    async def fail_run_unowned(self, run_id: str, error: str, now: datetime) -> bool:
        """Fail a non-terminal run from outside a worker (e.g. its workflow was deleted)."""

        def work(conn: Connection) -> bool:
            try:
                append_journal(
                    conn,
                    run_id,
                    [NewEvent(JournalEvent.RUN_FAILED, data={"error": error})],
                    now,
                    guard=Guard.FAILABLE,
                    values={
                        "status": RunStatus.FAILED.value,
                        "error": error,
                        # an ended run holds no lease (like finish and cancel)
                        "lease_owner": None,
                        "lease_expires_at": None,
                    },
                )
            except (TransitionRefused, NotFound):
                return False
            return True

        return await self.db.transact(work)


def _insert_run(
    conn: Connection,
    store: StoreBase,
    new: NewRun,
    now: datetime,
    events: Sequence[NewEvent],
) -> list[JournalEntry] | None:
    """Insert the run and its first events; returns them as journal entries, or None when
    the run's idempotency key was already used (nothing written)."""
    started = [
        NewEvent(
            JournalEvent.RUN_STARTED,
            data={"workflow": new.workflow, "requestedBy": new.requested_by, "agent": new.agent},
        ),
        *events,
    ]
    values = _run_values(new, now, next_seq=1 + len(started))
    if new.status == RunStatus.QUEUED and new.adopt is None:
        mark_ready(conn)
    if new.idempotency_key is not None:
        if not store.fast_insert_ignore_on(t.runs, "idempotency_key")(conn, values).rowcount:
            return None
    else:
        FAST_INSERT_RUN(conn, values)
    entries = [
        JournalEntry(
            run_id=new.id, seq=i + 1, event=ev.event, step_id=ev.step_id, data=ev.data, at=now
        )
        for i, ev in enumerate(started)
    ]
    FAST_INSERT_JOURNAL(
        conn,
        [
            {
                "run_id": e.run_id,
                "seq": e.seq,
                "step_id": e.step_id,
                "event": e.event.value,
                "data": e.data,
                "at": now,
            }
            for e in entries
        ],
    )
    return entries


_NOT_ENDED = {"output": None, "error": None}


def _run_values(new: NewRun, now: datetime, *, next_seq: int) -> dict[str, Any]:
    """The row of a new run (the ``Run`` it stands for, with ``_NOT_ENDED``)."""
    return {
        "id": new.id,
        "workflow": new.workflow,
        "status": (RunStatus.RUNNING if new.adopt else new.status).value,
        "input": new.input,
        "requested_by": new.requested_by,
        "agent": new.agent,
        "parent_run_id": new.parent_run_id,
        "parent_step_id": new.parent_step_id,
        "idempotency_key": new.idempotency_key,
        "lease_owner": new.adopt.owner if new.adopt else None,
        "lease_expires_at": new.adopt.until if new.adopt else None,
        "next_seq": next_seq,
        "created_at": now,
        "updated_at": now,
    }


def _wake_parent(conn: Connection, parent_id: str, event: NewEvent, now: datetime) -> None:
    """A child run ended: put its waiting parent back in the queue (in the child's transaction,
    so a crash cannot strand the parent)."""
    try:
        append_journal(
            conn,
            parent_id,
            [event],
            now,
            guard=Guard.PARKED,
            values={"status": RunStatus.QUEUED.value},
        )
        mark_ready(conn)
    except TransitionRefused:
        pass  # the parent was cancelled meanwhile: nothing to wake


def _cancel_unreached(conn: Connection, run_id: str, now: datetime) -> list[Outcome]:
    """Cancel the open requests of a run that has just ended (``decisions.unreached``),
    journaled after its end."""
    closed = decide_open(conn, run_id, lambda request: decisions.unreached(request, now))
    events = [e for outcome in closed for e in outcome.events]
    if events:
        append_journal(conn, run_id, events, now, guard=Guard.EXISTS)
    return closed
