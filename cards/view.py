"""``ApprovalView``: everything an approval card shows, read once from the engine's records.

The renderers never look at ``TakeoverRequest`` or ``Run`` themselves; they read this view.
Values here are *raw* (unescaped) text: escaping belongs to the output format and happens in
the templates' filters (see ``cards.templating``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cards.text import agent_text, canonical_json
from engine.domain.delegation import stand_ins
from engine.domain.model import (
    JSON,
    Run,
    RunStatus,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    TimeoutBehavior,
)
from engine.domain.timeline import minutes_text

SHORT_HASH = 12  # hex digits of the binding hash shown on cards
TITLE_CHARS = 300  # what every card shows of a title (the templates clip it there)
# Printable ASCII only, and none of the characters that end a Slack link or an HTML attribute.
# (IGNORECASE only on the scheme: with it, the negated class would also refuse "s" and "k",
# whose case foldings U+017F and U+212A lie in the refused range.)
_URL = re.compile(r"(?i:https?)://[^\x00-\x20\x7f-\U0010ffff<>\"'`|\\]+")

# Which buttons each request status offers. Approve = grant + release in one transaction;
# Take over = grant only, after which the card offers Release (DESIGN.md "Grant vs release").
ACTIONS: dict[TakeoverStatus, tuple[str, ...]] = {
    TakeoverStatus.PENDING: ("grant", "deny", "takeover"),
    TakeoverStatus.GRANTED: ("release",),
    TakeoverStatus.RELEASED: (),
    TakeoverStatus.DENIED: (),
    TakeoverStatus.EXPIRED: (),
    TakeoverStatus.CANCELLED: (),
}


@dataclass(frozen=True)
class Confidence:
    """A confidence-gate evaluation, as journaled in ``confidence_evaluated``."""

    score: float | None
    threshold: float | None
    estimator: str | None
    detail: str | None  # e.g. "3 of 5 samples said execute"
    decision: str | None  # a GateVerdict value, as the gate journaled it


@dataclass(frozen=True)
class PolicyMatch:
    """The policy rule that held a call."""

    decision: str
    rule: str | None


@dataclass(frozen=True)
class StepOutput:
    """An earlier step's output that the request's reason or arguments are made from."""

    step_id: str
    output_json: str  # canonical JSON


@dataclass(frozen=True)
class Approval:
    """One person's grant toward the quorum."""

    person: str
    at: datetime
    notes: str | None


@dataclass(frozen=True)
class ApprovalView:
    """One takeover request as every card renders it (raw text; the templates escape)."""

    request_id: str
    run_id: str
    step_id: str | None
    kind: TakeoverKind
    status: TakeoverStatus
    title: str
    reason: str
    agent: str | None
    workflow: str | None
    requested_by: str | None
    node_type: str | None
    connector: str | None
    action: str | None
    account: str | None
    arguments_json: str | None  # canonical JSON; None when the request carries no arguments
    arguments_error: str | None  # why arguments present in the request cannot be shown
    binding_hash: str | None
    confidence: Confidence | None
    policy: PolicyMatch | None
    created_at: datetime
    expires_at: datetime
    approvals_required: int
    approvals: tuple[Approval, ...]
    approvers: tuple[str, ...]
    decided_by: str | None
    decided_at: datetime | None
    notes: str | None
    released_by: str | None
    released_at: datetime | None
    timeout_behavior: TimeoutBehavior
    deny_reason_required: bool
    run_status: RunStatus | None
    approval_url: str | None
    run_url: str | None
    now: datetime | None  # when the view was built, for "expires in"; None: not shown
    step_outputs: tuple[StepOutput, ...] = ()  # what the approval rests on (details.stepOutputs)
    override: str | None = None  # "admin override": decided_by decided as an admin
    admins: bool = True  # app.yaml lists admins: one may decide alone (``override_possible``)
    delegates: tuple[tuple[str, str], ...] = ()  # (delegate, who is away): "for alice, away"

    @property
    def actions(self) -> tuple[str, ...]:
        """The verbs the card offers now (``grant``, ``deny``, ``takeover``, ``release``)."""
        return ACTIONS[self.status]

    @property
    def is_final(self) -> bool:
        return not self.actions

    @property
    def short_hash(self) -> str | None:
        """The binding hash as shown: its first hex digits, without an ``algo:`` prefix."""
        if not self.binding_hash:
            return None
        return self.binding_hash.rpartition(":")[2][:SHORT_HASH]

    @property
    def overridden(self) -> bool:
        """Whether an admin's override, not its approvers' count, granted the request."""
        decided = self.status in (TakeoverStatus.GRANTED, TakeoverStatus.RELEASED)
        return decided and self.override is not None

    @property
    def counted(self) -> tuple[Approval, ...]:
        """The approvals toward the quorum: an overriding admin's own grant is not one."""
        if not self.overridden:
            return self.approvals
        return tuple(a for a in self.approvals if a.person != self.decided_by)

    @property
    def quorum(self) -> str:
        """Quorum progress, e.g. "1 of 2 approvals"; "1 of 2, decided by alice's admin
        override" when an admin decided it short of its quorum (or outside its approvers)."""
        counted, required = len(self.counted), self.approvals_required
        if self.overridden:
            return f"{counted} of {required}, decided by {self.decided_by}'s {self.override}"
        return f"{counted} of {required} {'approval' if required == 1 else 'approvals'}"

    @property
    def override_possible(self) -> bool:
        """Whether an admin outside the approvers could still decide the request alone, ahead
        of its quorum (the cards say so: a chat card cannot know who reads it)."""
        pending = self.status is TakeoverStatus.PENDING
        return pending and self.admins and self.approvals_required > 1 and bool(self.approvers)

    @property
    def expires_in_minutes(self) -> int | None:
        if self.now is None or self.status is not TakeoverStatus.PENDING:
            return None  # a taken-over request waits for its release and no longer expires
        return max(0, math.ceil((self.expires_at - self.now).total_seconds() / 60))

    @property
    def expires_in(self) -> str | None:
        """``expires_in_minutes`` as a person reads it: "23 h 58 min" (``minutes_text``)."""
        minutes = self.expires_in_minutes
        return None if minutes is None else minutes_text(minutes)


def safe_url(value: object) -> str | None:
    """An absolute http(s) URL with nothing that could break out of a link, or None."""
    if isinstance(value, str) and _URL.fullmatch(value):
        return value
    return None


def _text(value: JSON) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _number(value: JSON) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _confidence(raw: JSON) -> Confidence | None:
    if not isinstance(raw, dict):
        return None
    score, threshold = _number(raw.get("score")), _number(raw.get("threshold"))
    detail = _text(raw.get("detail"))
    detail = agent_text(detail) if detail is not None else None
    votes = raw.get("votes")
    if detail is None and isinstance(votes, list) and votes:
        yes = sum(1 for v in votes if v is True)
        detail = f"{yes} of {len(votes)} samples said execute"
    # The gate's own verdict (a GateVerdict value), as it journaled it: never re-derived here
    # from score and threshold, so a card cannot disagree with what the run did.
    decision = _text(raw.get("decision"))
    return Confidence(score, threshold, _text(raw.get("estimator")), detail, decision)


def _policy(raw: JSON) -> PolicyMatch | None:
    if not isinstance(raw, dict) or raw.get("decision") is None:
        return None
    return PolicyMatch(decision=str(_text(raw["decision"])), rule=_text(raw.get("rule")))


def _arguments(details: dict[str, Any]) -> tuple[str | None, str | None]:
    if "args" not in details:
        return None, None
    try:
        return canonical_json(details["args"]), None
    except (RecursionError, ValueError, TypeError) as exc:
        return None, f"arguments cannot be shown here ({type(exc).__name__})"


def _step_outputs(raw: JSON) -> tuple[StepOutput, ...]:
    if not isinstance(raw, list):
        return ()
    found = []
    for entry in raw:
        if isinstance(entry, dict) and isinstance(entry.get("stepId"), str):
            try:
                found.append(StepOutput(entry["stepId"], canonical_json(entry.get("output"))))
            except (RecursionError, ValueError, TypeError):
                continue  # left out, never guessed
    return tuple(found)


def _title(request: TakeoverRequest, connector: str | None, action: str | None) -> str:
    summary = _text(request.details.get("summary"))
    if summary:
        return summary
    if connector and action:
        return f"{connector} · {action}"
    if request.kind is TakeoverKind.MANUAL:
        return f"Take over run {request.run_id}"
    return f"Approve step {request.step_id}" if request.step_id else "Approval requested"


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold().rstrip(".!")


def said_once(title: str, reason: str) -> tuple[str, str]:
    """The card's title and reason, each saying something the other does not: a held call's
    reason is its summary unless the agent gave one, and a card read "Send email to 1
    recipient" twice. When one holds the other, the longer is the title and there is no
    reason, "" (when it fits: a longer reason than a title shows stays where it is)."""
    if not reason:
        return title, reason
    short, long = _folded(title), _folded(reason)
    if long in short:
        return title, ""
    if short in long and len(reason) <= TITLE_CHARS:
        return reason, ""
    return title, reason


def build_view(
    request: TakeoverRequest,
    run: Run | None,
    *,
    approval_url: str | None,
    run_url: str | None,
    now: datetime | None = None,
    admins: bool = True,
) -> ApprovalView:
    """Read a takeover request, its run and its gate/policy details into one view. ``admins``:
    whether ``app.yaml`` lists any admin (none: no card says an admin may decide alone).

    ``request.details`` keys: ``args``, ``connector``, ``action``, ``account``,
    ``bindingHash``, ``nodeType``, ``workflow``, ``agent``, ``summary``, ``confidence``
    (``{score, threshold, estimator, detail?, votes?, decision?}``), ``policy``
    (``{decision, rule}``), ``stepOutputs`` (``[{stepId, output}]``). Malformed entries are
    left out, never guessed.
    """
    details = request.details if isinstance(request.details, dict) else {}
    connector, action = _text(details.get("connector")), _text(details.get("action"))
    arguments_json, arguments_error = _arguments(details)
    title, reason = said_once(
        agent_text(_title(request, connector, action)),
        agent_text(request.reason) if request.reason else "",
    )
    return ApprovalView(
        request_id=request.id,
        run_id=request.run_id,
        step_id=request.step_id,
        kind=request.kind,
        status=request.status,
        title=title,
        reason=reason,
        agent=_text(details.get("agent")) or (run.agent if run else None),
        workflow=_text(details.get("workflow")) or (run.workflow if run else None),
        requested_by=request.requested_by or (run.requested_by if run else None),
        node_type=_text(details.get("nodeType")),
        connector=connector,
        action=action,
        account=_text(details.get("account")),
        arguments_json=arguments_json,
        arguments_error=arguments_error,
        binding_hash=_text(details.get("bindingHash")),
        confidence=_confidence(details.get("confidence")),
        policy=_policy(details.get("policy")),
        created_at=_utc(request.created_at),
        expires_at=_utc(request.expires_at),
        approvals_required=max(1, request.approvals_required),
        approvals=tuple(Approval(v.person, _utc(v.at), v.notes) for v in request.votes),
        approvers=request.approvers,
        decided_by=request.decided_by,
        decided_at=_utc(request.decided_at) if request.decided_at else None,
        notes=request.notes,
        released_by=request.released_by,
        released_at=_utc(request.released_at) if request.released_at else None,
        timeout_behavior=request.timeout_behavior,
        deny_reason_required=request.deny_reason_required,
        run_status=run.status if run else None,
        approval_url=safe_url(approval_url),
        run_url=safe_url(run_url),
        now=_utc(now) if now else None,
        step_outputs=_step_outputs(details.get("stepOutputs")),
        override=override_label(request),
        admins=admins,
        delegates=tuple(stand_ins(request).items()),
    )


def override_label(request: TakeoverRequest) -> str | None:
    """ "admin override" when the request's decider decided it as an admin, not as one of its
    approvers (``details.override``, written with the decision); None otherwise."""
    raw = request.details.get("override") if isinstance(request.details, dict) else None
    if isinstance(raw, dict) and raw.get("by") == request.decided_by and request.decided_by:
        kind = raw.get("override")
        return f"{kind} override" if isinstance(kind, str) and kind.isidentifier() else None
    return None


def override_warning(request: TakeoverRequest, kind: str | None) -> str | None:
    """What a person about to decide ``request`` as an override (``kind``, e.g. "admin",
    from ``engine.domain.approvers.override_of``; None: not one) is told before clicking."""
    if kind is None or request.status is not TakeoverStatus.PENDING:
        return None
    if request.approvals_required > 1:
        done = f"{len(request.votes)} of {request.approvals_required}"
        return f"Approving now overrides the quorum ({done}): as an {kind}, you decide alone."
    return f"You are not among its approvers: deciding now is an {kind} override."


def decider_text(request: TakeoverRequest, actor: str | None) -> str | None:
    """``actor`` as a notice names them: "alice (admin override)" for the overriding decider."""
    label = override_label(request)
    if label and actor == request.decided_by:
        return f"{actor} ({label})"
    return actor


def _utc(moment: datetime) -> datetime:
    """Aware UTC; a naive time from the store is taken to be UTC already."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
