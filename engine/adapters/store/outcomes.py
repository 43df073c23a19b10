"""Writing a decision's ``Outcome`` (``engine.domain.decisions``): read the request, let the
domain decide, write what it decided in one guarded UPDATE, and read again when someone else
wrote first. ``engine.adapters.store.decisions`` uses it for the decisions a person makes; a
cancellation and a run's end use it for each open request of the run.

The guard is the lock (no ``FOR UPDATE``; why in ``engine.adapters.store.decisions``):
``UPDATE ... WHERE id AND status = <as read> [AND approvals = <as read>]``. When it matches
nothing, another decision committed on the row meanwhile: the row is read again (a new snapshot
under READ COMMITTED) and decided again."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.fast import Fast
from engine.adapters.store.statuses import status_in
from engine.adapters.store.takeovers import with_votes
from engine.domain.cancellation import REQUESTS_CANCELLED
from engine.domain.decisions import Outcome
from engine.domain.errors import NotFound
from engine.domain.model import TakeoverRequest

_ATTEMPTS = 100  # each miss is another decision committed on the row meanwhile
_READ = Fast(select(t.takeover_requests).where(t.takeover_requests.c.id == bindparam("request_id")))
_WRITE: dict[tuple[frozenset[str], bool], Fast] = {}


def _write_statement(columns: frozenset[str], counted: bool) -> Fast:
    """The guarded UPDATE of ``columns``; ``counted``: guarded by the vote count too. Built
    once per shape (a grant's vote, a grant that decides, a denial, a release ...)."""
    key = (columns, counted)
    stmt = _WRITE.get(key)
    if stmt is None:
        tr = t.takeover_requests
        guard = [tr.c.id == bindparam("request_id"), tr.c.status == bindparam("read_status")]
        if counted:
            guard.append(tr.c.approvals == bindparam("read_approvals"))
        values = {c: bindparam(f"set_{c}", type_=tr.c[c].type) for c in sorted(columns)}
        stmt = _WRITE[key] = Fast(update(tr).where(*guard).values(values))
    return stmt


def _column(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def write_outcome(conn: Connection, outcome: Outcome) -> bool:
    """The outcome's guarded UPDATE; False when the request changed since it was read."""
    counted = outcome.read_approvals is not None
    params: dict[str, Any] = {
        "request_id": outcome.request.id,
        "read_status": outcome.read_status.value,
    }
    if counted:
        params["read_approvals"] = outcome.read_approvals
    params.update({f"set_{c}": _column(v) for c, v in outcome.changes.items()})
    return bool(_write_statement(frozenset(outcome.changes), counted)(conn, params).rowcount)


def decide_on(
    conn: Connection, request_id: str, decide: Callable[[TakeoverRequest], Outcome | None]
) -> Outcome | None:
    """Read the request, ``decide`` on it and write the outcome (guarded); on a lost race read
    and decide again. The outcome written; None when ``decide`` found nothing to do, or the
    guard missed a row nothing changed (the caller says what that means)."""
    missed: dict[str, Any] | None = None
    for _ in range(_ATTEMPTS):
        row = _READ(conn, {"request_id": request_id}).mappings().one_or_none()
        if row is None:
            raise NotFound(f"takeover request {request_id} not found", request_id=request_id)
        if missed is not None and dict(row) == missed:
            return None  # the guard missed a row nothing changed: never decided here
        outcome = decide(with_votes(conn, row))
        if outcome is None or write_outcome(conn, outcome):
            return outcome
        missed = dict(row)
    return None


def decide_open(
    conn: Connection, run_id: str, decide: Callable[[TakeoverRequest], Outcome | None]
) -> list[Outcome]:
    """``decide_on`` each request of the run still open (oldest first): the outcomes written."""
    tr = t.takeover_requests
    ids = conn.execute(
        select(tr.c.id)
        .where(tr.c.run_id == run_id, status_in(tr.c.status, REQUESTS_CANCELLED))
        .order_by(tr.c.created_at, tr.c.id)
    ).scalars()
    return [outcome for i in list(ids) if (outcome := decide_on(conn, i, decide)) is not None]
