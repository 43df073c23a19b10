"""The vocabulary of Signoff: lifecycles as data, and the records the store hands back.

Every lifecycle is a ``StrEnum`` plus one ``ALLOWED`` table. The store applies a transition as a
conditional ``UPDATE ... WHERE status IN (allowed sources)``; zero rows changed is a typed error
(``engine.domain.errors.TransitionRefused``), never a silent no-op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

JSON = Any


class RunStatus(StrEnum):
    QUEUED = "queued"  # ready for a worker to claim
    RUNNING = "running"  # claimed by a worker holding a lease
    WAITING = "waiting"  # parked on a takeover request or a child run; holds nothing
    COMPLETED = "completed"  # terminal: the graph reached its end
    FAILED = "failed"  # terminal: a step failed, or a denial/expiry had no deny path
    CANCELLED = "cancelled"  # terminal: an admin cancelled it


RUN_ALLOWED: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    # running -> queued: a worker gives a run back (shutdown, or a lease taken over).
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.WAITING,
            RunStatus.COMPLETED,
            RunStatus.FAILED,
            RunStatus.CANCELLED,
            RunStatus.QUEUED,
        }
    ),
    RunStatus.WAITING: frozenset({RunStatus.QUEUED, RunStatus.FAILED, RunStatus.CANCELLED}),
    RunStatus.COMPLETED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}

TERMINAL_RUN_STATUSES = frozenset(s for s, nxt in RUN_ALLOWED.items() if not nxt)


class TakeoverStatus(StrEnum):
    PENDING = "pending"  # waiting for a person
    GRANTED = "granted"  # a person took the decision (or the step); awaiting release
    RELEASED = "released"  # terminal: handed back, the run was re-queued
    DENIED = "denied"  # terminal: refused
    EXPIRED = "expired"  # terminal: nobody decided before expiresAt
    CANCELLED = "cancelled"  # terminal: the run was cancelled


TAKEOVER_ALLOWED: dict[TakeoverStatus, frozenset[TakeoverStatus]] = {
    TakeoverStatus.PENDING: frozenset(
        {
            TakeoverStatus.GRANTED,
            TakeoverStatus.DENIED,
            TakeoverStatus.EXPIRED,
            TakeoverStatus.CANCELLED,
        }
    ),
    TakeoverStatus.GRANTED: frozenset({TakeoverStatus.RELEASED, TakeoverStatus.CANCELLED}),
    TakeoverStatus.RELEASED: frozenset(),
    TakeoverStatus.DENIED: frozenset(),
    TakeoverStatus.EXPIRED: frozenset(),
    TakeoverStatus.CANCELLED: frozenset(),
}

TERMINAL_TAKEOVER_STATUSES = frozenset(s for s, nxt in TAKEOVER_ALLOWED.items() if not nxt)


LIVE_RUN_STATUSES = frozenset(RUN_ALLOWED) - TERMINAL_RUN_STATUSES
OPEN_TAKEOVER_STATUSES = frozenset(TAKEOVER_ALLOWED) - TERMINAL_TAKEOVER_STATUSES


def sources_of(target: StrEnum, table: dict[Any, frozenset[Any]]) -> frozenset[Any]:
    """The statuses from which ``target`` may be reached, per a transition table."""
    return frozenset(src for src, targets in table.items() if target in targets)


def leading_to(target: StrEnum, table: dict[Any, frozenset[Any]]) -> frozenset[Any]:
    """The statuses from which ``target`` can still be reached, in one transition or more,
    without passing through it: a queued or running run can still park (``waiting``), a
    waiting one already has."""
    found: set[Any] = set()
    frontier = {target}
    while frontier:
        frontier = {s for t in frontier for s in sources_of(t, table)} - found - {target}
        found |= frontier
    return frozenset(found)


class JournalEvent(StrEnum):
    RUN_STARTED = "run_started"
    STEP_STARTED = "step_started"
    STEP_COMPLETED = "step_completed"
    STEP_FAILED = "step_failed"
    POLICY_EVALUATED = "policy_evaluated"
    CONFIDENCE_EVALUATED = "confidence_evaluated"
    TAKEOVER_REQUESTED = "takeover_requested"
    TAKEOVER_DELEGATED = "takeover_delegated"  # a delegate decides for an approver away
    TAKEOVER_GRANTED = "takeover_granted"
    TAKEOVER_DENIED = "takeover_denied"
    TAKEOVER_RELEASED = "takeover_released"
    TAKEOVER_EXPIRED = "takeover_expired"
    TAKEOVER_CANCELLED = "takeover_cancelled"
    RUN_WAITING = "run_waiting"
    RUN_RESUMED = "run_resumed"
    RUN_COMPLETED = "run_completed"
    RUN_FAILED = "run_failed"
    RUN_CANCELLED = "run_cancelled"
    FEEDBACK_RECORDED = "feedback_recorded"


class NodeType(StrEnum):
    TOOL = "tool"  # a Python callable: a tool app.yaml declares (or, in app.yaml, a function)
    CONNECTOR = "connector"  # a named integration action
    AI_STEP = "ai-step"  # a prompt sent to the configured LLM
    APPROVAL = "approval"  # a checkpoint placed by the workflow author
    WORKFLOW = "workflow"  # start a child run and wait for it


SIDE_EFFECTING = frozenset({NodeType.TOOL, NodeType.CONNECTOR})


class TakeoverKind(StrEnum):
    """Why a takeover request exists."""

    NODE = "node"  # an approval node in the graph
    GATE = "gate"  # the confidence gate diverted a side-effecting step
    POLICY = "policy"  # a policy rule held an agent's call
    MANUAL = "manual"  # an operator asked to take over a running run


class TimeoutBehavior(StrEnum):
    AUTO_REJECT = "auto-reject"
    AUTO_APPROVE = "auto-approve"


class Role(StrEnum):
    AGENT = "agent"  # starts runs and makes calls
    APPROVER = "approver"  # decides takeover requests
    ADMIN = "admin"  # everything


END = "end"  # the `next:` value that ends a run


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a workflow graph, as validated from YAML or JSON."""

    id: str
    type: NodeType
    next: str | None = None  # None: the following node in list order
    args: dict[str, JSON] = field(default_factory=dict)
    connector: str | None = None
    action: str | None = None
    function: str | None = None  # tool: "module:function"
    tool: str | None = None  # tool: the name of one of app.yaml's ``tools:``
    workflow: str | None = None  # workflow: the child workflow's name
    prompt: str | None = None  # ai-step
    requires_confidence: bool = False  # ai-step: gated only when set
    # approval fields (and the channels/approvers a gate diversion uses)
    reason: str | None = None
    timeout_minutes: int = 30
    timeout_behavior: TimeoutBehavior = TimeoutBehavior.AUTO_REJECT
    approvers: tuple[str, ...] = ()
    approvals_required: int = 1
    allow_self_approval: bool = False
    channels: tuple[str, ...] = ()
    on_deny: str | None = None
    deny_reason_required: bool = False
    remind_before_minutes: int | None = None
    escalate_after_minutes: int | None = None
    escalate_to: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Workflow:
    """A validated graph: nodes in list order, edges by `next`."""

    name: str
    nodes: tuple[Node, ...]
    # Each node id's position (the first, should an unvalidated graph repeat an id): the walk
    # asks for a node's successor at every step.
    _positions: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        positions: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            positions.setdefault(n.id, i)
        object.__setattr__(self, "_positions", positions)

    def node(self, node_id: str) -> Node:
        return self.nodes[self._positions[node_id]]

    def successor(self, node: Node) -> Node | None:
        """The node that runs after ``node`` (None at the end of the run)."""
        if node.next == END:
            return None
        if node.next is not None:
            return self.node(node.next)
        index = self._positions[node.id]
        return self.nodes[index + 1] if index + 1 < len(self.nodes) else None


@dataclass(frozen=True, slots=True)
class Run:
    id: str
    workflow: str
    status: RunStatus
    input: dict[str, JSON]
    created_at: datetime
    updated_at: datetime
    requested_by: str | None = None  # person name, or "token:<name>"
    agent: str | None = None
    parent_run_id: str | None = None
    parent_step_id: str | None = None
    idempotency_key: str | None = None
    output: JSON = None
    error: str | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JournalEntry:
    run_id: str
    seq: int
    event: JournalEvent
    step_id: str | None
    data: dict[str, JSON]
    at: datetime


@dataclass(frozen=True, slots=True)
class Vote:
    """One person's grant toward a quorum."""

    person: str
    at: datetime
    notes: str | None = None


@dataclass(frozen=True, slots=True)
class TakeoverRequest:
    """A run parked for a person. ``details`` carries what the cards show: the exact pending
    arguments (``args``), ``connector``, ``action``, ``account``, ``bindingHash``, ``nodeType``,
    and any ``confidence`` or ``policy`` evaluation."""

    id: str
    run_id: str
    step_id: str | None
    kind: TakeoverKind
    status: TakeoverStatus
    reason: str
    created_at: datetime
    expires_at: datetime
    approvers: tuple[str, ...] = ()  # people names after group expansion; () = any approver
    approvals_required: int = 1
    allow_self_approval: bool = False
    timeout_behavior: TimeoutBehavior = TimeoutBehavior.AUTO_REJECT
    channels: tuple[str, ...] = ()
    requested_by: str | None = None  # who started the run (self-approval check)
    details: dict[str, JSON] = field(default_factory=dict)
    votes: tuple[Vote, ...] = ()
    decided_by: str | None = None
    decided_at: datetime | None = None
    notes: str | None = None
    released_by: str | None = None
    released_at: datetime | None = None
    sdp_offer: str | None = None
    sdp_answer: str | None = None
    deny_reason_required: bool = False
    remind_at: datetime | None = None
    escalate_at: datetime | None = None
    escalate_to: tuple[str, ...] = ()

    @property
    def is_final(self) -> bool:
        return self.status in TERMINAL_TAKEOVER_STATUSES


@dataclass(frozen=True, slots=True)
class ApiToken:
    name: str
    role: Role
    person: str | None
    created_at: datetime
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is acting: a person from ``people:``, or an API token with no person."""

    name: str  # person name, or "token:<token name>"
    role: Role
    person: str | None = None
    token: str | None = None  # token name when acting through the API

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """A chat message to deliver, written in the same transaction as the event that caused it.
    The payload names what to render (e.g. ``{"requestId": ...}``); the dispatcher renders the
    current state at delivery time, so a late delivery never shows a stale card."""

    channel: str  # "slack:C123", "teams:ops", "web", "webhook:name"
    kind: str  # "card", "card_update", "notice"
    dedupe_key: str
    payload: dict[str, JSON]
    run_id: str | None = None
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class NewEvent:
    """A journal event about to be appended (the store assigns its sequence number)."""

    event: JournalEvent
    step_id: str | None = None
    data: dict[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OutboxRecord:
    """A queued chat message as the dispatcher sees it."""

    id: int
    channel: str
    kind: str
    dedupe_key: str
    payload: dict[str, JSON]
    run_id: str | None
    request_id: str | None
    attempts: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ChatThread:
    """Where a run's messages go in one channel: the root message of its thread."""

    run_id: str
    channel: str
    platform: str
    thread_ref: str  # Slack: the root message ts; Teams: the root activity id
    data: dict[str, JSON]


@dataclass(frozen=True, slots=True)
class ChatMessageRef:
    """A message we posted, kept so it can be updated (cards) or found again."""

    run_id: str
    request_id: str | None
    channel: str
    platform: str
    kind: str
    message_ref: str  # Slack ts, Teams activity id
    data: dict[str, JSON]


@dataclass(frozen=True, slots=True)
class Conversation:
    """A Teams (or other) conversation the bot can post into proactively."""

    platform: str
    conversation_id: str
    name: str | None
    reference: dict[str, JSON]
