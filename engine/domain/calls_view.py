"""Where a held call stands, read from its run and its policy request.

One pure function, ``call_view``, so ``GET /v1/calls/{id}``, the long poll and the signed
callback can never disagree about a call's outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from engine.domain.call_workflow import APPROVE_ONLY
from engine.domain.expiry import status_at
from engine.domain.model import Run, RunStatus, TakeoverRequest, TakeoverStatus


class CallStatus(StrEnum):
    BLOCKED = "blocked"  # a block rule refused it; nothing was stored
    PENDING_APPROVAL = "pending_approval"  # held: waiting for a person (or granted, not released)
    RUNNING = "running"  # allowed or approved; the connector is being called
    EXECUTED = "executed"  # final: the connector returned ``result``
    APPROVED = "approved"  # final, approve_only: approved; the caller performs the action
    DENIED = "denied"  # final: a person refused (``reason`` holds their notes)
    EXPIRED = "expired"  # final: nobody decided before ``expiresAt``
    FAILED = "failed"  # final: the connector (or the run) failed (``reason``)
    CANCELLED = "cancelled"  # final: an admin cancelled the run


FINAL = frozenset(
    {
        CallStatus.BLOCKED,
        CallStatus.EXECUTED,
        CallStatus.APPROVED,
        CallStatus.DENIED,
        CallStatus.EXPIRED,
        CallStatus.FAILED,
        CallStatus.CANCELLED,
    }
)


@dataclass(frozen=True, slots=True)
class CallView:
    execution_id: str | None  # None only for a blocked call: it has no run
    status: CallStatus
    result: Any = None
    reason: str | None = None
    decided_by: str | None = None
    rule: str | None = None  # the rule that blocked it
    request: TakeoverRequest | None = None  # the policy request of a held call

    @property
    def is_final(self) -> bool:
        return self.status in FINAL

    def as_json(self) -> dict[str, Any]:
        """``{executionId, status, result | reason, decidedBy?}``: the GET body and the body
        of a callback."""
        out: dict[str, Any] = {"executionId": self.execution_id, "status": self.status.value}
        if self.status in (CallStatus.EXECUTED, CallStatus.APPROVED):
            out["result"] = self.result
        elif self.reason is not None:
            out["reason"] = self.reason
        if self.decided_by is not None:
            out["decidedBy"] = self.decided_by
        return out


def call_view(run: Run, request: TakeoverRequest | None, now: datetime) -> CallView:
    """The status of the call behind ``run``. A decided request speaks first (a denial is final
    before the worker has failed the run); a pending request past ``expiresAt`` reads as expired
    even before the sweeper has marked it."""

    def view(status: CallStatus, **kw: Any) -> CallView:
        return CallView(execution_id=run.id, status=status, request=request, **kw)

    approver = request.decided_by if request is not None else None
    if run.status == RunStatus.COMPLETED:
        if run.input.get("mode") == APPROVE_ONLY:
            return view(CallStatus.APPROVED, decided_by=approver)
        return view(CallStatus.EXECUTED, result=run.output, decided_by=approver)
    if request is not None:
        if request.status == TakeoverStatus.DENIED:
            return view(CallStatus.DENIED, reason=request.notes or "denied", decided_by=approver)
        if status_at(request, now) == TakeoverStatus.EXPIRED:
            when = request.expires_at.isoformat().replace("+00:00", "Z")
            return view(CallStatus.EXPIRED, reason=f"nobody decided before {when}")
        if request.status == TakeoverStatus.CANCELLED:
            return view(CallStatus.CANCELLED, reason=run.error or "cancelled")
        if request.status in (TakeoverStatus.PENDING, TakeoverStatus.GRANTED):
            if run.status != RunStatus.CANCELLED:
                return view(CallStatus.PENDING_APPROVAL)
    if run.status == RunStatus.CANCELLED:
        return view(CallStatus.CANCELLED, reason=run.error or "cancelled")
    if run.status == RunStatus.FAILED:
        return view(CallStatus.FAILED, reason=run.error or "failed", decided_by=approver)
    return view(CallStatus.RUNNING, decided_by=approver)
