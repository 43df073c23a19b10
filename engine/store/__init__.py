"""The SQL store: the only part of the engine that speaks SQLAlchemy."""

from __future__ import annotations

from engine.store.base import Adopt
from engine.store.calls import CallStore
from engine.store.chat import ChatStore
from engine.store.db import Database
from engine.store.decisions import DecisionStore
from engine.store.expiry import ExpiryStore
from engine.store.gate import GateStore
from engine.store.outbox import OutboxStore
from engine.store.queue import QueueStore
from engine.store.records import RecordStore
from engine.store.reminders import ReminderStore
from engine.store.runs import NewRun, RunStore
from engine.store.takeovers import OutboxFor, TakeoverStore
from engine.store.web import WebStore


class SqlStore(
    RunStore,
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
    WebStore,
):
    """Every store operation, on SQLite or PostgreSQL. Each method is one transaction."""


__all__ = ["Adopt", "Database", "NewRun", "OutboxFor", "SqlStore"]
