"""The store's absences (``engine.adapters.store.absences``), on SQLite and PostgreSQL: one per
person, replaced when set again, read only while in force, ended once, each change audited."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.engine import Connection

from engine.adapters.store import SqlStore
from engine.adapters.store import tables as t
from engine.domain.delegation import Absence

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def _away(person: str, delegate: str, days: float, set_by: str | None = None) -> Absence:
    until = NOW + timedelta(days=days)
    return Absence(person, delegate, until, set_by=set_by or person, set_at=NOW)


async def _audit(store: SqlStore) -> list[tuple[str, str, str, object, object]]:
    def work(conn: Connection) -> list[tuple[str, str, str, object, object]]:
        a = t.audit_log
        q = select(a.c.actor, a.c.action, a.c.target, a.c.old, a.c.new).order_by(a.c.id)
        return [(r.actor, r.action, r.target, r.old, r.new) for r in conn.execute(q)]

    return await store.db.transact(work, write=False)


async def test_an_absence_is_read_while_in_force_and_replaced_when_set_again(
    store: SqlStore,
) -> None:
    first = _away("alice", "bob", 3)
    assert await store.set_absence(first) is None
    await store.set_absence(_away("carol", "dave", 1, set_by="alice"))
    assert await store.absences(NOW) == [first, _away("carol", "dave", 1, set_by="alice")]
    assert await store.absences(NOW, ["alice"]) == [first]
    assert await store.absences(NOW, []) == []
    assert await store.absences(NOW, ["bob"]) == []

    again = _away("alice", "dave", 10)
    assert await store.set_absence(again) == first
    assert await store.absences(NOW, ["alice"]) == [again]

    # carol's ends at its ``until``: from then on it routes nothing
    assert [a.person for a in await store.absences(NOW + timedelta(days=1))] == ["alice"]
    late = NOW + timedelta(days=1, microseconds=-1)
    assert [a.person for a in await store.absences(late)] == ["alice", "carol"]


async def test_ending_an_absence_deletes_it_once_and_audits_who(store: SqlStore) -> None:
    absence = _away("alice", "bob", 3)
    await store.set_absence(absence)
    assert await store.end_absence("alice", "carol", NOW + timedelta(hours=1)) == absence
    assert await store.absences(NOW) == []
    assert await store.end_absence("alice", "carol", NOW) is None  # nothing left to end
    assert await store.end_absence("nobody", "carol", NOW) is None

    audit = await _audit(store)
    assert [(actor, action, target) for actor, action, target, _, _ in audit] == [
        ("alice", "away.set", "away.alice"),
        ("carol", "away.end", "away.alice"),
    ]
    assert audit[0][3] is None and audit[0][4] == absence.as_json()
    assert audit[1][3] == absence.as_json() and audit[1][4] is None


async def test_a_lapsed_absence_ends_without_an_audit(store: SqlStore) -> None:
    await store.set_absence(_away("alice", "bob", 1))
    assert await store.end_absence("alice", "alice", NOW + timedelta(days=2)) is None
    assert await store.absences(NOW) == []  # gone all the same
    assert [action for _, action, _, _, _ in await _audit(store)] == ["away.set"]
