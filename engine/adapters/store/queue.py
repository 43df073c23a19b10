"""The approval queue across runs: takeover requests of every kind (approval nodes, gate
diversions, held calls, manual takeovers) narrowed in SQL and read a page at a time.

Pages are keyed, not offset: oldest (or newest) first by ``(created_at, id)``, each page starting
beyond the last row of the one before, so a request decided between two pages never shifts the next.
"""

from __future__ import annotations

import operator
from typing import Any

from sqlalchemy import and_, cast, func, or_, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase
from engine.adapters.store.rows import run_from_row, takeover_from_row
from engine.adapters.store.statuses import status_in
from engine.adapters.store.takeovers import votes_of
from engine.domain.model import Run, TakeoverRequest
from engine.domain.records import QueueQuery

_RUN_COLUMNS = [c.label(f"r__{c.name}") for c in t.runs.c]


class QueueStore(StoreBase):
    async def approval_queue(self, query: QueueQuery) -> list[tuple[TakeoverRequest, Run]]:
        """Requests matching ``query``, oldest (or newest) first, with their runs (at most
        ``limit``)."""

        def work(conn: Connection) -> list[tuple[TakeoverRequest, Run]]:
            tr = t.takeover_requests
            postgres = conn.dialect.name == "postgresql"
            where: list[ColumnElement[bool]] = [status_in(tr.c.status, [query.status])]
            if query.kind is not None:
                where.append(tr.c.kind == query.kind.value)
            if query.approver is not None:
                where.append(
                    or_(
                        func.json_array_length(tr.c.approvers) == 0,
                        _holds(tr.c.approvers, query.approver, postgres),
                    )
                )
            if query.channel is not None:
                where.append(_holds(tr.c.channels, query.channel, postgres))
            if query.workflow is not None:
                named = tr.c.details["workflow"].as_string()
                where.append(func.coalesce(named, t.runs.c.workflow) == query.workflow)
            if query.connector is not None:
                where.append(tr.c.details["connector"].as_string() == query.connector)
            if query.after is not None:
                at, request_id = query.after
                beyond = operator.lt if query.newest_first else operator.gt  # the page's way
                where.append(
                    or_(
                        beyond(tr.c.created_at, at),
                        and_(tr.c.created_at == at, beyond(tr.c.id, request_id)),
                    )
                )
            order = (
                (tr.c.created_at.desc(), tr.c.id.desc())
                if query.newest_first
                else (tr.c.created_at, tr.c.id)
            )
            q = (
                select(tr, *_RUN_COLUMNS)
                .join(t.runs, t.runs.c.id == tr.c.run_id)
                .where(*where)
                .order_by(*order)
                .limit(query.limit)
            )
            rows = list(conn.execute(q).mappings())
            votes = votes_of(conn, [r["id"] for r in rows if r["approvals"]])
            return [
                (takeover_from_row(r, votes.get(r["id"], ())), run_from_row(_run_part(r)))
                for r in rows
            ]

        return await self.db.transact(work, write=False)


def _holds(column: Any, value: str, postgres: bool) -> ColumnElement[bool]:
    """The JSON array in ``column`` has the string ``value`` as an element."""
    if postgres:  # the columns are ``json``: as ``jsonb``, containment is one operator
        return cast(column, postgresql.JSONB).contains([value])
    each = func.json_each(column).table_valued("value")
    return select(each.c.value).where(each.c.value == value).exists()


def _run_part(row: Any) -> dict[str, Any]:
    return {c.name: row[f"r__{c.name}"] for c in t.runs.c}
