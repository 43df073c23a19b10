"""Workers and their leases: claiming queued runs (or runs whose lease ran out), renewing
leases, and giving a run back to the queue.

A running run is held by one worker's lease; every append of that worker is fenced by it
(``Guard.LEASE``), so a worker that lost its lease to another is refused, never heard twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Integer, String, and_, bindparam, or_, select, update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase
from engine.adapters.store.db import mark_ready
from engine.adapters.store.fast import Fast
from engine.adapters.store.journal import read_for_worker
from engine.adapters.store.statuses import may_become, status_in
from engine.adapters.store.tables import UTCDateTime
from engine.domain.model import JournalEntry, Run, RunStatus
from engine.domain.records import Plan

_CLAIMS: dict[bool, Fast] = {}


def _claimable() -> Any:
    """Queued runs, and running runs whose lease ran out."""
    return or_(
        may_become(t.runs.c.status, RunStatus.RUNNING),
        and_(  # a lease taken over: running still, for another worker
            status_in(t.runs.c.status, [RunStatus.RUNNING]),
            t.runs.c.lease_expires_at < bindparam("now", type_=UTCDateTime()),
        ),
    )


_ANY_CLAIMABLE = Fast(select(t.runs.c.id).where(_claimable()).limit(1))


def _claim_statement(sqlite: bool) -> Fast:
    """The claimable runs, oldest first, claimed in one statement; built once per dialect
    (PostgreSQL skips rows another replica is claiming at the same moment)."""
    stmt = _CLAIMS.get(sqlite)
    if stmt is None:
        pick = select(t.runs.c.id).where(_claimable()).order_by(t.runs.c.updated_at)
        pick = pick.limit(bindparam("limit", type_=Integer()))
        if not sqlite:
            pick = pick.with_for_update(skip_locked=True)
        stmt = _CLAIMS[sqlite] = Fast(
            update(t.runs)
            .where(t.runs.c.id.in_(pick.scalar_subquery()))
            .values(
                status=RunStatus.RUNNING.value,
                lease_owner=bindparam("owner", type_=String()),
                lease_expires_at=bindparam("until", type_=UTCDateTime()),
            )
            .returning(t.runs.c.id)
        )
    return stmt


class LeaseStore(StoreBase):
    async def claim_runs(
        self,
        owner: str,
        now: datetime,
        lease: timedelta,
        limit: int,
        *,
        read: dict[str, tuple[Run, list[JournalEntry]]] | None = None,
        plan: Plan | None = None,
    ) -> list[str]:
        """Take up to ``limit`` queued runs (or running runs whose lease ran out) for ``owner``.
        With ``read``, each claimed run and its journal, read in the claiming transaction, are
        put there: what its worker replays first, with no read of its own (and with ``plan``,
        what that replay would commit first is appended already: ``Adopt.plan``)."""

        def work(conn: Connection) -> list[str]:
            if read is not None:
                read.clear()  # from an attempt that was rolled back
            params = {"now": now, "owner": owner, "until": now + lease, "limit": limit}
            ids = list(_claim_statement(self.db.is_sqlite)(conn, params).scalars())
            if read is not None:
                for run_id in ids:
                    read[run_id] = read_for_worker(conn, run_id, owner, now, plan)
            return ids

        if await self.nothing_to_claim(_ANY_CLAIMABLE, {"now": now}):
            return []
        return await self.db.transact(work)

    async def renew_leases(self, run_ids: Sequence[str], owner: str, until: datetime) -> int:
        """Extend ``owner``'s leases on ``run_ids`` to ``until``; a run no longer running or
        leased by ``owner`` is left alone. Returns how many were extended."""

        def work(conn: Connection) -> int:
            res = conn.execute(
                update(t.runs)
                .where(
                    self.one_of(t.runs.c.id, run_ids),
                    t.runs.c.lease_owner == owner,
                    status_in(t.runs.c.status, [RunStatus.RUNNING]),
                )
                .values(lease_expires_at=until)
            )
            return int(res.rowcount)

        return await self.db.transact(work) if run_ids else 0

    async def renew_lease(self, run_id: str, owner: str, until: datetime) -> bool:
        return bool(await self.renew_leases([run_id], owner, until))

    async def requeue_run(self, run_id: str, owner: str, now: datetime) -> bool:
        """Give a claimed run back to the queue (shutdown): another worker resumes it."""

        def work(conn: Connection) -> bool:
            res = conn.execute(
                update(t.runs)
                .where(t.runs.c.id == run_id, *_fence(owner))
                .values(
                    status=RunStatus.QUEUED.value,
                    lease_owner=None,
                    lease_expires_at=None,
                    updated_at=now,
                )
            )
            mark_ready(conn)
            return bool(res.rowcount)

        return await self.db.transact(work)


def _fence(owner: str) -> list[Any]:
    """The lease holder's run: the one ``owner`` claimed, still running."""
    return [t.runs.c.lease_owner == owner, status_in(t.runs.c.status, [RunStatus.RUNNING])]
