"""Applying a decision on a takeover request: the store reads, the domain decides, the store
writes what was decided.

``apply_decision`` runs one transaction: it reads the request, hands it to the caller's
``decide`` (a pure function of ``engine.domain.decisions`` bound by the service, its
authorization first), and applies the ``Outcome``: one guarded UPDATE of the columns it
changes (``WHERE id AND status = <as read> [AND approvals = <as read>]``), the vote it
records, its journal events (with the run put back to work when it says so,
``engine.adapters.store.resume``) and its card messages. The store counts nothing and decides
nothing: a refusal is the domain's error, raised before anything is written.

The read takes no lock (no ``FOR UPDATE``): the sweeper picks due requests with ``FOR UPDATE
SKIP LOCKED``, and a decision refused on a request past its deadline must not hide that
request from it while the refusal rolls back (a grant racing the sweeper at the deadline has
exactly one outcome). The guarded UPDATE is the lock: on PostgreSQL a concurrent decision's
UPDATE waits for the first to commit, re-checks its guard on the committed row and matches
nothing; the loser then reads the row again in the same transaction (a new snapshot under
READ COMMITTED) and decides again: ``AlreadyDecided`` for a second decision, or the next vote
of a quorum counted on the first. SQLite's writer runs one transaction at a time, so its guard
never misses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import insert_outbox
from engine.adapters.store.fast import Fast
from engine.adapters.store.journal import Guard, append_journal
from engine.adapters.store.resume import ResumeStore, unclaimed
from engine.adapters.store.takeovers import load_takeover, with_votes
from engine.domain.decisions import Outcome, already_decided_error
from engine.domain.errors import DuplicateVote, NotFound
from engine.domain.model import TakeoverRequest, Vote
from engine.domain.records import Adopt, LinkUse

Decide = Callable[[TakeoverRequest], Outcome]

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


def _write(conn: Connection, outcome: Outcome) -> bool:
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


class DecisionStore(ResumeStore):
    async def apply_decision(
        self,
        request_id: str,
        decide: Decide,
        now: datetime,
        *,
        adopt: Adopt | None = None,
        link: LinkUse | None = None,
    ) -> TakeoverRequest:
        """Read the request, ``decide`` on it and apply its ``Outcome``, in one transaction
        (with ``link``'s use when it comes through a signed link). A run it puts back to work
        is re-queued, or claimed for ``adopt``'s worker. Returns the request as decided."""
        return await self._decide(adopt, self._decision_unit(request_id, decide, now, adopt), link)

    def _decision_unit(
        self, request_id: str, decide: Decide, now: datetime, adopt: Adopt | None
    ) -> Callable[[Connection], TakeoverRequest]:
        def work(conn: Connection) -> TakeoverRequest:
            unclaimed(adopt)
            missed: dict[str, Any] | None = None
            for _ in range(_ATTEMPTS):
                row = _READ(conn, {"request_id": request_id}).mappings().one_or_none()
                if row is None:
                    raise NotFound(
                        f"takeover request {request_id} not found", request_id=request_id
                    )
                if missed is not None and dict(row) == missed:
                    break  # the guard missed a row nothing changed: never decided here
                outcome = decide(with_votes(conn, row))
                if _write(conn, outcome):
                    self._apply(conn, outcome, now, adopt)
                    return outcome.request
                missed = dict(row)
            raise already_decided_error(load_takeover(conn, request_id), now)

        return work

    def _apply(
        self, conn: Connection, outcome: Outcome, now: datetime, adopt: Adopt | None
    ) -> None:
        """The rest of a decision whose guarded UPDATE matched: its vote, events, messages."""
        request = outcome.request
        if outcome.vote is not None:
            _record_vote(self, conn, request.id, outcome.vote)
        if outcome.back_to_work:
            self._back_to_work(conn, request.run_id, outcome.events, now, adopt)
        elif outcome.events:
            append_journal(conn, request.run_id, outcome.events, now, guard=Guard.LIVE)
        insert_outbox(conn, self, outcome.outbox, now)


def _record_vote(store: DecisionStore, conn: Connection, request_id: str, vote: Vote) -> None:
    """The vote's row; one already there is ``DuplicateVote``, rolling the decision back."""
    values: Mapping[str, Any] = {
        "request_id": request_id,
        "person": vote.person,
        "notes": vote.notes,
        "at": vote.at,
    }
    voted = store.fast_insert_ignore_on(t.takeover_votes, "request_id", "person")(conn, values)
    if not voted.rowcount:
        raise DuplicateVote(
            f"{vote.person} has already granted this request", request_id=request_id
        )
