"""What the pages need from the store: single-use approval links, the console's reads, and
the local admin's one-time sign-in token.

A decision through a signed link must be recorded as a *use* of that link in the decision's own
transaction: otherwise a crash between the two leaves either a decision whose link still works
or a used link without a decision. ``with_link_use`` runs the record and the decision's own
unit of work (what ``grant``, ``deny`` and ``release`` do with their ``link``) in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase
from engine.adapters.store.records import token_from_row
from engine.adapters.store.rows import journal_from_row, run_from_row, takeover_from_row
from engine.domain.errors import LinkUsed, NotFound
from engine.domain.model import ApiToken, JournalEntry, Role, Run, TakeoverRequest
from engine.domain.records import LinkUse

T = TypeVar("T")

# Link verbs that decide (insert the use) and the one that follows a takeover (update it).
_DECIDING = ("grant", "deny", "takeover")
_RELEASE = "release"


def _use(row: Any) -> LinkUse:
    return LinkUse(row["request_id"], row["person"], row["action"], row["used_at"])


class PageStore(StoreBase):
    # -- single-use approval links -----------------------------------------------------------

    async def link_use(self, request_id: str, person: str) -> LinkUse | None:
        lu = t.link_uses
        return await self.first_row(
            select(lu).where(lu.c.request_id == request_id, lu.c.person == person), _use
        )

    async def with_link_use(self, use: LinkUse, decide: Callable[[Connection], T]) -> T:
        """Record ``use`` and run the decision ``decide`` (a store unit of work such as
        a grant's) in one transaction.

        A deciding verb inserts the use, so a second one raises ``LinkUsed``; ``release``
        follows a takeover through the same link and turns that use into a release. A decision
        that loses (someone else decided first) rolls its use back with it."""

        def work(conn: Connection) -> T:
            lu = t.link_uses
            key = (lu.c.request_id == use.request_id, lu.c.person == use.person)
            if use.action == _RELEASE:
                moved = conn.execute(
                    update(lu).where(*key, lu.c.action == "takeover").values(action=_RELEASE)
                )
                recorded = bool(moved.rowcount)
            else:
                if use.action not in _DECIDING:
                    raise ValueError(f"not a link verb: {use.action}")
                inserted = conn.execute(
                    self.insert_ignore(lu)
                    .values(
                        request_id=use.request_id,
                        person=use.person,
                        used_at=use.used_at,
                        action=use.action,
                    )
                    .on_conflict_do_nothing(index_elements=["request_id", "person"])
                )
                recorded = bool(inserted.rowcount)
            if not recorded:
                row = conn.execute(select(lu).where(*key)).mappings().first()
                raise LinkUsed(use.request_id, None if row is None else _use(row))
            return decide(conn)

        return await self.db.transact(work)

    # -- the console -------------------------------------------------------------------------

    async def run_with_entries_after(
        self, run_id: str, after_seq: int
    ) -> tuple[Run, list[JournalEntry]]:
        """A run and its journal entries after ``after_seq``, read together (the live
        timeline polls this)."""

        def work(conn: Connection) -> tuple[Run, list[JournalEntry]]:
            row = conn.execute(select(t.runs).where(t.runs.c.id == run_id)).mappings().first()
            if row is None:
                raise NotFound(f"run {run_id} not found", run_id=run_id)
            j = t.journal
            q = select(j).where(j.c.run_id == run_id, j.c.seq > after_seq).order_by(j.c.seq)
            return run_from_row(row), [journal_from_row(r) for r in conn.execute(q).mappings()]

        return await self.db.transact(work, write=False)

    async def runs_by_id(self, run_ids: Sequence[str]) -> dict[str, Run]:
        def work(conn: Connection) -> dict[str, Run]:
            q = select(t.runs).where(t.runs.c.id.in_(list(dict.fromkeys(run_ids))))
            return {r["id"]: run_from_row(r) for r in conn.execute(q).mappings()}

        if not run_ids:
            return {}
        return await self.db.transact(work, write=False)

    async def takeovers_of_runs(self, run_ids: Sequence[str]) -> dict[str, list[TakeoverRequest]]:
        """Each run's takeover requests, oldest first, without their votes: the console's runs
        list reads every run's outcome from them in one query."""

        def work(conn: Connection) -> dict[str, list[TakeoverRequest]]:
            tr = t.takeover_requests
            q = select(tr).where(tr.c.run_id.in_(ids)).order_by(tr.c.created_at, tr.c.id)
            found: dict[str, list[TakeoverRequest]] = {}
            for row in conn.execute(q).mappings():
                found.setdefault(row["run_id"], []).append(takeover_from_row(row))
            return found

        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return {}
        return await self.db.transact(work, write=False)

    # -- tokens behind console sessions ------------------------------------------------------

    async def active_token(self, name: str) -> ApiToken | None:
        """The token ``name`` unless it was revoked (a session lives only as long as it)."""
        at = t.api_tokens
        q = select(at).where(at.c.name == name, at.c.revoked_at.is_(None))
        return await self.first_row(q, token_from_row)

    async def put_token(
        self, name: str, role: Role, person: str | None, token_hash: str, now: datetime
    ) -> ApiToken:
        """Create the token ``name``, or give it a new value (and un-revoke it): the old value
        stops working at once."""

        def work(conn: Connection) -> ApiToken:
            at = t.api_tokens
            values = {"role": role.value, "person": person, "token_hash": token_hash}
            changed = conn.execute(
                update(at).where(at.c.name == name).values(revoked_at=None, **values)
            )
            if not changed.rowcount:
                conn.execute(insert(at).values(name=name, created_at=now, **values))
            return token_from_row(
                conn.execute(select(at).where(at.c.name == name)).mappings().one()
            )

        return await self.db.transact(work)

    async def rotate_token(self, name: str, token_hash: str, new_hash: str) -> ApiToken | None:
        """Spend a one-time token: if ``token_hash`` is still the value of ``name``, replace it
        with ``new_hash`` and return the token; None when it was already spent or revoked."""

        def work(conn: Connection) -> ApiToken | None:
            at = t.api_tokens
            row = (
                conn.execute(
                    update(at)
                    .where(
                        at.c.name == name,
                        at.c.token_hash == token_hash,
                        at.c.revoked_at.is_(None),
                    )
                    .values(token_hash=new_hash)
                    .returning(at)
                )
                .mappings()
                .first()
            )
            return None if row is None else token_from_row(row)

        return await self.db.transact(work)
