"""The store, as the services and the gate see it: protocols split by concern.

Each protocol names the operations one concern needs, with the signatures of
``engine.adapters.store.SqlStore``, which satisfies them structurally (``engine.assembly`` holds
a checked assignment, so a drift fails mypy). Every operation is one transaction: a decision
made through a signed link records the link's use in its own (``Decided.link``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from engine.domain.decisions import Outcome
from engine.domain.delegation import Absence
from engine.domain.model import JournalEntry, NewEvent, OutboxRecord, Run, TakeoverRequest
from engine.domain.records import Adopt, GatedOutcome, LinkUse, OutboxFor, QueueQuery
from engine.ports.replays import ReplayStore
from engine.ports.store_runs import RunStore

T = TypeVar("T")

Unit = Callable[[Any], T]
"""Work the store runs in one of its transactions; the argument is the store's connection."""


class OutageStore(Protocol):
    async def outlast_outage(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        seconds: float,
        stopping: Callable[[], bool],
        what: str,
    ) -> T:
        """``attempt()``, called again while the database stays unreachable, for up to
        ``seconds`` and never once ``stopping()``; then its last error."""


class TakeoverStore(Protocol):
    async def get_takeover(self, request_id: str) -> TakeoverRequest: ...

    async def request_takeover(
        self,
        request: TakeoverRequest,
        now: datetime,
        event: NewEvent,
        *,
        outbox: OutboxFor | None = None,
    ) -> TakeoverRequest: ...


Decide = Callable[[TakeoverRequest], Outcome]
"""A decision bound by its service (who, the verdict, the time; its authorization first):
given the request as the store read it, the ``Outcome`` to apply (``engine.domain.decisions``)."""


class DecisionStore(Protocol):
    """Every decision on a takeover request (grant, deny, release) goes through one method."""

    async def apply_decision(
        self,
        request_id: str,
        decide: Decide,
        now: datetime,
        *,
        adopt: Adopt | None = None,
        link: LinkUse | None = None,
    ) -> TakeoverRequest:
        """In one transaction (with ``link``'s use when it comes through a signed link): read
        the request, ``decide`` on it, and apply the outcome in one guarded write with its
        vote, journal events and card messages; a run it hands back is re-queued or claimed
        for ``adopt``'s worker. The request as decided."""


class ExpiryStore(Protocol):
    async def expire_due(
        self, now: datetime, *, limit: int = 500, outbox: OutboxFor | None = None
    ) -> list[TakeoverRequest]: ...

    async def cancel_run(self, run_id: str, actor: str, now: datetime) -> list[TakeoverRequest]:
        """Cancel the run, its open requests (each one's ``decisions.cancel`` outcome, with
        its card messages) and its unfinished child runs; the requests cancelled."""


class ReminderStore(Protocol):
    async def queue_reminders(
        self, now: datetime, *, remind: OutboxFor, limit: int = 500
    ) -> tuple[list[TakeoverRequest], list[TakeoverRequest]]:
        """The due reminders (``remind``'s messages) and escalations
        (``engine.domain.decisions.escalate``'s outcomes), each queued once."""


class OutboxStore(Protocol):
    async def claim_outbox(
        self, owner: str, now: datetime, *, limit: int = 100, hold: timedelta
    ) -> list[OutboxRecord]: ...

    async def urgent_due(self, channel: str, now: datetime) -> bool: ...

    async def mark_sent(self, message_id: int, owner: str, now: datetime) -> None: ...

    async def mark_retry(
        self, message_id: int, owner: str, at: datetime, error: str, *, count: bool = True
    ) -> None: ...

    async def renew_claims(self, message_ids: list[int], owner: str, until: datetime) -> None: ...

    async def release_claims(self, message_ids: list[int], owner: str) -> None: ...

    async def mark_failed(self, message_id: int, error: str) -> None: ...


class GateStore(Protocol):
    async def gated_outcomes(
        self, agent: str | None, node_type: str, *, limit: int = 200
    ) -> list[GatedOutcome]: ...

    async def append_feedback(
        self,
        run_id: str,
        step_id: str,
        score: int,
        comment: str | None,
        who: str,
        now: datetime,
    ) -> JournalEntry: ...

    async def set_gate_overrides(
        self,
        scope: str,
        scope_key: str,
        values: Mapping[str, Any],
        actor: str,
        now: datetime,
    ) -> dict[str, Any]: ...

    async def gate_overrides(self) -> list[dict[str, Any]]: ...


class CallStore(Protocol):
    async def recent_release(
        self, binding_hash: str, since: datetime
    ) -> TakeoverRequest | None: ...

    async def call_request(self, run_id: str) -> TakeoverRequest | None: ...


class QueueStore(Protocol):
    async def approval_queue(self, query: QueueQuery) -> list[tuple[TakeoverRequest, Run]]: ...


class WorkflowStore(Protocol):
    async def stored_workflows(self) -> dict[str, dict[str, Any]]: ...

    async def stored_workflow(self, name: str) -> dict[str, Any] | None: ...


class LinkStore(Protocol):
    async def link_use(self, request_id: str, person: str) -> LinkUse | None: ...

    async def with_link_use(self, use: LinkUse, decide: Unit[T]) -> T: ...


class AbsenceStore(Protocol):
    """People away and their delegates (``engine.domain.delegation``), each change audited."""

    async def set_absence(self, absence: Absence) -> Absence | None:
        """Record ``absence``, replacing the person's earlier one (returned, or None)."""

    async def end_absence(self, person: str, actor: str, now: datetime) -> Absence | None:
        """End ``person``'s absence: the one ended, None when none was active at ``now``."""

    async def absences(self, now: datetime, people: Sequence[str] | None = None) -> list[Absence]:
        """The absences active at ``now`` (of ``people`` only, when given), by person."""


class Store(
    RunStore,
    OutageStore,
    TakeoverStore,
    DecisionStore,
    ExpiryStore,
    ReminderStore,
    OutboxStore,
    GateStore,
    CallStore,
    QueueStore,
    WorkflowStore,
    LinkStore,
    ReplayStore,
    AbsenceStore,
    Protocol,
):
    """Every store operation a service or the gate uses."""
