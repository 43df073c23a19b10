"""Records the services hand the store and get back from it.

They were defined beside the SQL that reads and writes them; they are what a use case says to
any store (``engine.ports.store``), so they live in the domain, and the SQL store imports them
from here like every other caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.domain.model import (
    JournalEntry,
    NewEvent,
    OutboxMessage,
    Run,
    RunStatus,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
)

Plan = Callable[[Run, list[JournalEntry]], list[NewEvent]]
"""The events a worker's replay would commit first, given the run and its journal."""

OutboxFor = Callable[[TakeoverRequest], Sequence[OutboxMessage]]
"""The chat messages a change to a request queues, written in the change's transaction."""


@dataclass(slots=True)
class Adopt:
    """A worker's free slot, offered to a transaction that puts a run back to work: the run is
    claimed for ``owner`` until ``until`` in that transaction instead of queued for any
    replica, and ``run_id`` names it once the transaction has done so."""

    owner: str
    until: datetime
    run_id: str | None = None
    written: tuple[Run, list[JournalEntry]] | None = None
    """The run and its journal as the claiming transaction left them: its worker starts from
    them instead of reading them again in a transaction of its own."""
    plan: Plan | None = None
    """The events the worker's replay would commit first, when the journal alone decides
    them (``Interpreter.resume_plan``): the claiming transaction appends them too, under the
    worker's lease, and the worker finds them done."""


@dataclass(frozen=True, slots=True)
class NewRun:
    id: str
    workflow: str
    input: dict[str, Any]
    requested_by: str | None = None
    agent: str | None = None
    parent_run_id: str | None = None
    parent_step_id: str | None = None
    idempotency_key: str | None = None
    status: RunStatus = RunStatus.QUEUED
    adopt: Adopt | None = None
    """A queued run created claimed (running) by this worker instead: no queue round trip."""


@dataclass(frozen=True, slots=True)
class GatedOutcome:
    """One step the gate auto-executed, and what became of it."""

    run_id: str
    step_id: str
    run_status: RunStatus
    feedback: int | None  # the latest feedback score on the step, if any
    at: datetime  # when the gate scored it


@dataclass(frozen=True, slots=True)
class QueueQuery:
    """What to read: every field narrows the queue; None leaves it open."""

    status: TakeoverStatus = TakeoverStatus.PENDING
    approver: str | None = None  # a person; a request naming nobody is everyone's
    workflow: str | None = None  # the request's workflow, else its run's
    connector: str | None = None  # the connector of the call or step it approves
    channel: str | None = None  # one of the places its card went
    kind: TakeoverKind | None = None
    after: tuple[datetime, str] | None = None  # the (created_at, id) the page starts after
    limit: int = 50
    newest_first: bool = False  # newest first (a page then starts before ``after``)


@dataclass(frozen=True, slots=True)
class LinkUse:
    """A decision made through a signed link (``action`` is the link verb); a second one
    through the same link raises ``engine.domain.errors.LinkUsed``."""

    request_id: str
    person: str
    action: str
    used_at: datetime
