"""The SQL store: the only part of the engine that speaks SQLAlchemy."""

from __future__ import annotations

from engine.store.calls import CallStore
from engine.store.db import Database
from engine.store.gate import GateStore
from engine.store.outbox import OutboxStore
from engine.store.records import RecordStore
from engine.store.runs import NewRun, RunStore
from engine.store.takeovers import OutboxFor, TakeoverStore


class SqlStore(RunStore, TakeoverStore, RecordStore, OutboxStore, GateStore, CallStore):
    """Every store operation, on SQLite or PostgreSQL. Each method is one transaction."""


__all__ = ["Database", "NewRun", "OutboxFor", "SqlStore"]
