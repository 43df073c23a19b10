"""Thread notices: the messages Signoff posts beside an approval card.

Each kind has one frozen dataclass naming its data fields; ``render_notice(kind, platform,
**data)`` builds it, so a missing or misspelt field is a ``TypeError`` at the call, not a blank
in a card. Times are aware datetimes; ``mentions`` are platform user ids (Slack ``U…``/``W…``,
user groups ``S…``; Teams ``{"id", "name"}`` mappings or bare ids; the web shows names).
URL fields keep only absolute http(s) URLs (``cards.view.safe_url``); others become None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from cards.view import safe_url
from engine.domain.timeline import minutes_text

Mention = str | Mapping[str, str]


class NoticeKind(StrEnum):
    CONFIDENCE = "confidence"  # a gated step was scored
    DECISION = "decision"  # someone granted, denied, took over or released (or lost the race)
    REMINDER = "reminder"  # a pending request expires soon
    EXPIRED = "expired"  # a request expired undecided
    ESCALATED = "escalated"  # nobody decided in time; more people are asked
    STEP_RESULT = "step_result"  # the released step completed or failed


@dataclass(frozen=True)
class ConfidenceNotice:
    score: float
    threshold: float
    estimator: str  # "self-consistency" | "verbalization"
    decision: str  # "execute" | "divert"
    detail: str | None = None  # e.g. "3 of 5 samples said execute"
    votes: Sequence[bool] | None = None  # per-sample answers; summarised when detail is None
    step_id: str | None = None
    node_type: str | None = None
    agent: str | None = None

    @property
    def summary(self) -> str | None:
        if self.detail:
            return self.detail
        if self.votes:
            return f"{sum(1 for v in self.votes if v)} of {len(self.votes)} samples said execute"
        return None


@dataclass(frozen=True)
class DecisionNotice:
    actor: str  # who decided (for already_decided: who decided first)
    verb: str  # "grant" (approve) | "takeover" | "release" | "deny" | "cancel"
    status: str  # the request's status after the decision
    notes: str | None = None  # approval notes or the denial reason
    at: datetime | None = None
    title: str | None = None  # the approval's title, to tie the notice to its card
    quorum: str | None = None  # e.g. "1 of 2 approvals" while a quorum is incomplete
    already_decided: bool = False  # the clicker lost: ``actor`` had already decided it
    requester: Mention | None = None  # who asked, told how their request ended (mentioned)


@dataclass(frozen=True)
class ReminderNotice:
    expires_at: datetime
    title: str | None = None
    approval_url: str | None = None
    quorum: str | None = None
    mentions: Sequence[Mention] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "approval_url", safe_url(self.approval_url))


@dataclass(frozen=True)
class ExpiredNotice:
    expired_at: datetime
    timeout_behavior: str = "auto-reject"  # "auto-reject" | "auto-approve"
    title: str | None = None
    requester: Mention | None = None  # who asked, told their request expired (mentioned)


@dataclass(frozen=True)
class EscalatedNotice:
    mentions: Sequence[Mention]
    title: str | None = None
    waited_minutes: int | None = None
    approval_url: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "approval_url", safe_url(self.approval_url))

    @property
    def waited(self) -> str | None:
        """How long it has waited, as a person writes it ("1 h 20 min")."""
        return None if self.waited_minutes is None else minutes_text(self.waited_minutes)


@dataclass(frozen=True)
class StepResultNotice:
    run_id: str
    step_id: str
    ok: bool
    error: str | None = None  # failed steps: the error text
    output_summary: str | None = None  # completed steps: a short account of the output
    run_url: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_url", safe_url(self.run_url))

    @property
    def feedback_value(self) -> str:
        """Slack button value for 👍/👎: ``{run_id}:{step_id}``."""
        return f"{self.run_id}:{self.step_id}"


NOTICES: dict[NoticeKind, type[Any]] = {
    NoticeKind.CONFIDENCE: ConfidenceNotice,
    NoticeKind.DECISION: DecisionNotice,
    NoticeKind.REMINDER: ReminderNotice,
    NoticeKind.EXPIRED: ExpiredNotice,
    NoticeKind.ESCALATED: EscalatedNotice,
    NoticeKind.STEP_RESULT: StepResultNotice,
}


def mention_id(mention: Mention) -> str:
    return str(mention.get("id", "")) if isinstance(mention, Mapping) else str(mention)


def mention_name(mention: Mention) -> str:
    if isinstance(mention, Mapping):
        return str(mention.get("name") or mention.get("id", ""))
    return str(mention)
