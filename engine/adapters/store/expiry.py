"""Ending requests without a decision: expiry (the sweeper) and cancellation (an admin).

The rules are the domain's (``engine.domain.expiry``: when a request expires and what that
writes; ``engine.domain.cancellation``: what a cancellation ends with the run and journals);
here they are applied in as few statements as each dialect allows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    String,
    any_,
    bindparam,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase, insert_outbox
from engine.adapters.store.db import mark_ready
from engine.adapters.store.fast import Fast
from engine.adapters.store.journal import (
    Guard,
    append_journal,
    json_keys,
    requeue_with_events,
    requeue_with_events_cte,
)
from engine.adapters.store.outcomes import decide_open
from engine.adapters.store.rows import takeover_from_row
from engine.adapters.store.statuses import status_in
from engine.adapters.store.tables import UTCDateTime
from engine.domain import decisions
from engine.domain.cancellation import (
    CANCELLED_RUN,
    CHILDREN_CANCELLED,
    cancelled_error,
    run_cancelled,
)
from engine.domain.decisions import Outcome
from engine.domain.errors import TransitionRefused
from engine.domain.expiry import EXPIRED, EXPIRES, EXPIRY_EVENT, expiry_data, has_expired
from engine.domain.model import NewEvent, TakeoverRequest
from engine.domain.records import OutboxFor


class ExpiryStore(StoreBase):
    async def expire_due(
        self, now: datetime, *, limit: int = 500, outbox: OutboxFor | None = None
    ) -> list[TakeoverRequest]:
        """Expire up to ``limit`` pending requests past ``expiresAt`` (each exactly once, safe
        with several sweepers) and re-queue their runs to apply ``timeoutBehavior``."""

        def work(conn: Connection) -> list[TakeoverRequest]:
            tr = t.takeover_requests
            pick = (
                select(tr.c.id, tr.c.run_id)
                .where(status_in(tr.c.status, EXPIRES), has_expired(tr.c.expires_at, now))
                .order_by(tr.c.expires_at)
                .limit(limit)
            )
            if not self.db.is_sqlite:
                pick = pick.with_for_update(skip_locked=True)
            picked = (conn.execute(pick)).all()
            by_run: dict[str, str] = {}
            for request_id, run_id in picked:
                by_run.setdefault(run_id, request_id)  # one per run per batch: seq numbers
            if not by_run:
                return []
            if not self.db.is_sqlite:
                rows = list(
                    conn.execute(
                        _EXPIRE_ALL,
                        {"ids": list(by_run.values()), "run_ids": list(by_run), "now": now},
                    ).mappings()
                )
                if rows:
                    mark_ready(conn)
                return _expired(conn, rows)
            rows = list(_SQLITE_EXPIRE(conn, {"ids": list(by_run.values()), "now": now}).mappings())
            if not rows:
                return []
            appends = [
                (
                    r["run_id"],
                    NewEvent(
                        EXPIRY_EVENT, r["step_id"], expiry_data(r["id"], r["timeout_behavior"])
                    ),
                )
                for r in rows
            ]
            if requeue_with_events(conn, appends, now):
                mark_ready(conn)
            return _expired(conn, rows)

        def _expired(conn: Connection, rows: list[Any]) -> list[TakeoverRequest]:
            expired = [takeover_from_row(r) for r in rows]
            if outbox is not None:
                insert_outbox(conn, self, [m for req in expired for m in outbox(req)], now)
            return expired

        return await self.db.transact(work)

    async def cancel_run(self, run_id: str, actor: str, now: datetime) -> list[TakeoverRequest]:
        """Cancel a run, its open takeover requests and its unfinished child runs, with the
        requests' card updates and notices."""

        def work(conn: Connection) -> list[TakeoverRequest]:
            cancelled: list[Outcome] = []
            pending = [run_id]
            first = True
            while pending:
                current = pending.pop()
                try:
                    cancelled += _cancel_one(conn, current, actor, now)
                except TransitionRefused:
                    if first:
                        raise
                first = False
                children = conn.execute(
                    select(t.runs.c.id).where(
                        t.runs.c.parent_run_id == current,
                        status_in(t.runs.c.status, CHILDREN_CANCELLED),
                    )
                )
                pending.extend(children.scalars())
            insert_outbox(conn, self, [m for outcome in cancelled for m in outcome.outbox], now)
            return [outcome.request for outcome in cancelled]

        return await self.db.transact(work)


def _expire_all_statement() -> Any:
    """PostgreSQL: a sweep batch's three writes in one statement, set-based in the database
    (no journal rows built and bound one by one here): the picked requests expire, and their
    live runs get their ``takeover_expired`` event through the batch form of the journal's
    append (``requeue_with_events_cte``). Returns the expired requests' rows."""
    tr = t.takeover_requests
    now = bindparam("now", type_=UTCDateTime())
    expired = (
        update(tr)
        .where(
            tr.c.id == any_(bindparam("ids", type_=postgresql.ARRAY(String()))),
            status_in(tr.c.status, EXPIRES),
        )
        .values(status=EXPIRED.value, decided_at=now)
        .returning(*tr.c)
        .cte("lapsed")
    )
    journaled = requeue_with_events_cte(
        expired,
        EXPIRY_EVENT,
        expiry_data(expired.c.id, expired.c.timeout_behavior),
        run_ids=bindparam("run_ids", type_=postgresql.ARRAY(String())),
        now=now,
    )
    return select(expired).add_cte(journaled.cte("journaled"))


_EXPIRE_ALL = _expire_all_statement()

_SQLITE_EXPIRE = Fast(
    update(t.takeover_requests)
    .where(
        t.takeover_requests.c.id.in_(json_keys()),
        status_in(t.takeover_requests.c.status, EXPIRES),
    )
    .values(
        status=EXPIRED.value,
        decided_at=bindparam("now", type_=UTCDateTime()),
    )
    .returning(t.takeover_requests)
)


def _cancel_one(conn: Connection, run_id: str, actor: str, now: datetime) -> list[Outcome]:
    """Cancel one run and its open requests: each request's ``decisions.cancel`` outcome
    written as a decision is (``decide_open``), then the run's end after their events."""
    outcomes = decide_open(conn, run_id, lambda request: decisions.cancel(request, actor, now))
    append_journal(
        conn,
        run_id,
        [*(e for outcome in outcomes for e in outcome.events), run_cancelled(actor)],
        now,
        guard=Guard.CANCELLABLE,
        values={
            "status": CANCELLED_RUN.value,
            "lease_owner": None,
            "lease_expires_at": None,
            "error": cancelled_error(actor),
        },
        refused="the run has already ended",
    )
    return outcomes
