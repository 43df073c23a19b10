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
from typing import Any

from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import insert_outbox
from engine.adapters.store.journal import Guard, append_journal
from engine.adapters.store.outcomes import decide_on
from engine.adapters.store.resume import ResumeStore, unclaimed
from engine.adapters.store.takeovers import load_takeover
from engine.domain.decisions import Outcome, already_decided_error
from engine.domain.errors import DuplicateVote
from engine.domain.model import TakeoverRequest, Vote
from engine.domain.records import Adopt, LinkUse

Decide = Callable[[TakeoverRequest], Outcome]


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
            outcome = decide_on(conn, request_id, decide)
            if outcome is None:
                raise already_decided_error(load_takeover(conn, request_id), now)
            self._apply(conn, outcome, now, adopt)
            return outcome.request

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
