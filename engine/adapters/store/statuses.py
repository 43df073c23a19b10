"""The domain's lifecycles as SQL conditions.

A status column is only ever tested against statuses taken from the domain: a member of its
``StrEnum``, or the sources its transition table gives a target (``engine.domain.model``,
``engine.domain.outbox``). A conditional transition is ``UPDATE ... WHERE status IN
(may_become(target))``, so the tables and the SQL cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, literal

from engine.domain.model import RUN_ALLOWED, TAKEOVER_ALLOWED, sources_of
from engine.domain.outbox import OUTBOX_ALLOWED

_TABLES: dict[type[StrEnum], dict[Any, frozenset[Any]]] = {
    table_type: table
    for table in (RUN_ALLOWED, TAKEOVER_ALLOWED, OUTBOX_ALLOWED)
    for table_type in {type(status) for status in table}
}


def status_in(column: Any, statuses: Iterable[StrEnum]) -> ColumnElement[bool]:
    """``column = status`` for one, ``column IN (...)`` for more: one bound literal per status
    (not an expanding parameter, so a statement built on it compiles once:
    ``engine.adapters.store.fast``), in the enum's order (the same SQL in every process)."""
    wanted = set(statuses)
    if not wanted:
        raise ValueError("no status to test for")
    kind = type(next(iter(wanted)))
    values = [status.value for status in kind if status in wanted]
    if len(values) == 1:
        matches: ColumnElement[bool] = column == literal(values[0])
    else:
        matches = column.in_([literal(value) for value in values])
    return matches


def may_become(column: Any, target: StrEnum) -> ColumnElement[bool]:
    """Rows whose status may move to ``target``, by its lifecycle's transition table."""
    return status_in(column, sources_of(target, _TABLES[type(target)]))
