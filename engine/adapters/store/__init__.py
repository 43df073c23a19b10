"""The SQL store: the only part of the engine that speaks SQLAlchemy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from engine.adapters.store import db
from engine.adapters.store.absences import AbsenceStore
from engine.adapters.store.calls import CallStore
from engine.adapters.store.chat import ChatStore
from engine.adapters.store.db import Database
from engine.adapters.store.decisions import DecisionStore
from engine.adapters.store.expiry import ExpiryStore
from engine.adapters.store.gate import GateStore
from engine.adapters.store.leases import LeaseStore
from engine.adapters.store.outbox import OutboxStore
from engine.adapters.store.pages import PageStore
from engine.adapters.store.queue import QueueStore
from engine.adapters.store.records import RecordStore
from engine.adapters.store.reminders import ReminderStore
from engine.adapters.store.replays import ReplayStore
from engine.adapters.store.runs import RunStore
from engine.adapters.store.takeovers import TakeoverStore

T = TypeVar("T")


class SqlStore(
    RunStore,
    LeaseStore,
    TakeoverStore,
    DecisionStore,
    ExpiryStore,
    RecordStore,
    OutboxStore,
    ChatStore,
    GateStore,
    CallStore,
    ReminderStore,
    QueueStore,
    PageStore,
    ReplayStore,
    AbsenceStore,
):
    """Every store operation, on SQLite or PostgreSQL. Each method is one transaction."""

    async def outlast_outage(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        seconds: float,
        stopping: Callable[[], bool],
        what: str,
    ) -> T:
        """``attempt()`` again while the database is unreachable (``db.outlast_outage``):
        what an outage is, is the store's to know, not the caller's."""
        return await db.outlast_outage(attempt, seconds=seconds, stopping=stopping, what=what)


__all__ = ["Database", "SqlStore"]
