"""A fixed sample request in each state, for ``signoff cards render`` and the golden files."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from cards.notices import NoticeKind
from cards.view import ApprovalView, build_view
from engine.domain.model import (
    JSON,
    Run,
    RunStatus,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    Vote,
)

STATES = ("pending", "granted", "released", "denied", "expired", "cancelled")
SAMPLE_NOW = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)
SAMPLE_ARGS: dict[str, JSON] = {
    "order": "A-1042",
    "amount": {"currency": "EUR", "value": "129.90"},
    "note": "customer asked on 2025-03-13 <support ticket #88>",
}
APPROVAL_URL = "https://signoff.example.com/approvals/tk_7f3a9c"
RUN_URL = "https://signoff.example.com/runs/run_51d2e0"


def sample_run() -> Run:
    return Run(
        id="run_51d2e0",
        workflow="refund-demo",
        status=RunStatus.WAITING,
        input={"order": "A-1042", "amount": "129.90"},
        created_at=SAMPLE_NOW - timedelta(minutes=2),
        updated_at=SAMPLE_NOW,
        requested_by="carol",
        agent="support-bot",
    )


_SAMPLE: Any = object()  # "the sample arguments" (None is a valid argument value)


def sample_request(state: str = "pending", args: JSON = _SAMPLE) -> TakeoverRequest:
    """The sample request in ``state``; ``args`` replaces the sample arguments when given."""
    created = SAMPLE_NOW - timedelta(minutes=1)
    base = TakeoverRequest(
        id="tk_7f3a9c",
        run_id="run_51d2e0",
        step_id="refund",
        kind=TakeoverKind.GATE,
        status=TakeoverStatus.PENDING,
        reason="Refund 129.90 EUR for order A-1042",
        created_at=created,
        expires_at=created + timedelta(minutes=30),
        approvers=("alice", "bob"),
        approvals_required=2,
        requested_by="carol",
        details={
            "args": SAMPLE_ARGS if args is _SAMPLE else args,
            "connector": "demo-ledger",
            "action": "refund",
            "account": "ledger-eu",
            "bindingHash": "sha256:9c1e5f0a7b3d2c4e8f6a1b0d9e7c5a3f",
            "nodeType": "connector",
            "workflow": "refund-demo",
            "agent": "support-bot",
            "confidence": {
                "score": 0.4,
                "threshold": 0.75,
                "estimator": "self-consistency",
                "decision": "divert",  # the gate always journals its verdict
                "votes": [True, False, True, False, False],
            },
        },
        votes=(Vote("alice", created + timedelta(seconds=30), "matches the ticket"),),
    )
    decided = created + timedelta(minutes=5)
    released = created + timedelta(minutes=9)
    if state == "pending":
        return base
    if state == "granted":
        return replace(base, status=TakeoverStatus.GRANTED, decided_by="bob", decided_at=decided)
    if state == "released":
        return replace(
            base,
            status=TakeoverStatus.RELEASED,
            votes=(*base.votes, Vote("bob", decided, None)),
            decided_by="bob",
            decided_at=decided,
            released_by="bob",
            released_at=decided,
            notes="ok, within policy",
        )
    if state == "denied":
        return replace(
            base,
            status=TakeoverStatus.DENIED,
            decided_by="bob",
            decided_at=decided,
            notes="duplicate of refund A-1041",
        )
    if state == "expired":
        return replace(base, status=TakeoverStatus.EXPIRED, votes=())
    if state == "cancelled":
        return replace(
            base, status=TakeoverStatus.CANCELLED, decided_by="dave", decided_at=released
        )
    raise ValueError(f"unknown state {state!r}; expected one of {', '.join(STATES)}")


def sample_view(state: str = "pending", args: JSON = _SAMPLE) -> ApprovalView:
    return build_view(
        sample_request(state, args),
        sample_run(),
        approval_url=APPROVAL_URL,
        run_url=RUN_URL,
        now=SAMPLE_NOW,
    )


# Sample data for each notice kind (fields: cards.notices).
SAMPLE_NOTICES: dict[NoticeKind, dict[str, Any]] = {
    NoticeKind.CONFIDENCE: {
        "score": 0.4,
        "threshold": 0.75,
        "estimator": "self-consistency",
        "decision": "divert",
        "votes": [True, False, True, False, False],
        "step_id": "refund",
        "node_type": "connector",
        "agent": "support-bot",
    },
    NoticeKind.DECISION: {
        "actor": "alice",
        "verb": "grant",
        "status": "pending",
        "notes": "matches the ticket",
        "at": SAMPLE_NOW,
        "title": "demo-ledger · refund",
        "quorum": "1 of 2 approvals",
    },
    NoticeKind.REMINDER: {
        "expires_at": SAMPLE_NOW + timedelta(minutes=10),
        "title": "demo-ledger · refund",
        "approval_url": APPROVAL_URL,
        "quorum": "1 of 2 approvals",
        "mentions": ["U012ABCDEF"],
    },
    NoticeKind.EXPIRED: {
        "expired_at": SAMPLE_NOW + timedelta(minutes=29),
        "timeout_behavior": "auto-reject",
        "title": "demo-ledger · refund",
    },
    NoticeKind.ESCALATED: {
        "mentions": ["U012ABCDEF", "S0FINANCE"],
        "title": "demo-ledger · refund",
        "waited_minutes": 20,
        "approval_url": APPROVAL_URL,
    },
    NoticeKind.STEP_RESULT: {
        "run_id": "run_51d2e0",
        "step_id": "refund",
        "ok": False,
        "error": "ledger answered 409: refund already issued",
        "run_url": RUN_URL,
    },
}
