"""Putting a decided request's run back to work, in the decision's transaction.

A decision that hands the run back (a release, a denial, a grant that releases) either queues
the parked run for any replica or, when the deciding replica offers a free worker slot
(``Adopt``), claims it for that worker right here: the worker starts from the run and journal
this transaction leaves, with what its replay would commit first already appended.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase
from engine.adapters.store.db import mark_ready
from engine.adapters.store.fast import Fast
from engine.adapters.store.journal import REQUEUE, Guard, append_journal, entries, read_journal
from engine.adapters.store.rows import run_from_row
from engine.domain.model import NewEvent, Run, RunStatus, TakeoverRequest
from engine.domain.records import Adopt, LinkUse

T = TypeVar("T")

_RUN_LOCKED: dict[bool, Fast] = {}


class ResumeStore(StoreBase):
    """What every decision that hands a run back shares: its transaction, and the run queued
    or claimed for the deciding replica's worker."""

    if TYPE_CHECKING:  # ``PageStore``'s, in ``SqlStore``

        async def with_link_use(self, use: LinkUse, decide: Callable[[Connection], T]) -> T: ...

    async def _decide(
        self,
        adopt: Adopt | None,
        unit: Callable[[Connection], TakeoverRequest],
        link: LinkUse | None = None,
    ) -> TakeoverRequest:
        """Run a decision's unit, in one transaction with ``link``'s use when it comes through
        a signed link. When it fails, a claim one of its attempts made reaches no worker: that
        attempt's commit may not have happened (the last attempt can fail before its unit even
        runs again), and a worker trusting its run and journal would call the next step with
        nothing committed."""
        try:
            if link is not None:
                return await self.with_link_use(link, unit)
            return await self.db.transact(unit)
        except BaseException:
            unclaimed(adopt)
            raise

    def _back_to_work(
        self,
        conn: Connection,
        run_id: str,
        events: Sequence[NewEvent],
        now: datetime,
        adopt: Adopt | None,
    ) -> None:
        """Append a decision's events and put its run back to work: a parked run is claimed
        for ``adopt``'s worker when one is offered, else queued for any replica. A run that
        has not parked yet (a manual takeover decided ahead of time) keeps its status."""
        if adopt is not None:
            adopt.run_id, adopt.written = None, None
            parked = self._parked(conn, run_id)
            if parked is not None:
                self._claim(conn, parked, events, now, adopt)
                return
        append_journal(conn, run_id, events, now, guard=Guard.LIVE, values={"status": REQUEUE})
        mark_ready(conn)

    def _claim(
        self,
        conn: Connection,
        run: Run,
        events: Sequence[NewEvent],
        now: datetime,
        adopt: Adopt,
    ) -> None:
        """Claim a parked run for ``adopt``'s worker with the decision's events and, after
        them, what its replay would commit first (``Adopt.plan``): one append. The worker
        gets the run and journal as this transaction leaves them."""
        journal = read_journal(conn, run.id)
        claimed = replace(
            run,
            status=RunStatus.RUNNING,
            lease_owner=adopt.owner,
            lease_expires_at=adopt.until,
            updated_at=now,
        )
        if adopt.plan is not None:  # the plan reads the journal with the decision in it
            after = journal[-1].seq + 1 if journal else 1
            decided = journal + entries(run.id, after, events, now)
            events = [*events, *adopt.plan(claimed, decided)]
        values = {
            "status": RunStatus.RUNNING.value,
            "lease_owner": adopt.owner,
            "lease_expires_at": adopt.until,
        }
        first = append_journal(conn, run.id, events, now, guard=Guard.LIVE, values=values)
        adopt.run_id = run.id
        adopt.written = claimed, journal + entries(run.id, first, events, now)

    def _parked(self, conn: Connection, run_id: str) -> Run | None:
        """The run if it waits; on PostgreSQL its row stays locked until the commit."""
        sqlite = self.db.is_sqlite
        stmt = _RUN_LOCKED.get(sqlite)
        if stmt is None:
            query = select(t.runs).where(t.runs.c.id == bindparam("run_id"))
            stmt = _RUN_LOCKED[sqlite] = Fast(query if sqlite else query.with_for_update())
        row = stmt(conn, {"run_id": run_id}).mappings().first()
        if row is None or row["status"] != RunStatus.WAITING.value:
            return None
        return run_from_row(row)


def unclaimed(adopt: Adopt | None) -> None:
    """At the start of each attempt of a unit: a claim made by an attempt that was rolled
    back (and retried) must not reach the worker."""
    if adopt is not None:
        adopt.run_id, adopt.written = None, None
