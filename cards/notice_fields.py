"""The fields of a thread notice, from the outbox payload the engine queued: one reading for
every platform (each renders them with ``render_notice(kind, platform, **fields)``). Text that
comes from a step or an estimator (outputs, errors, details) goes through ``agent_text``: one
line, quoted when it begins like one of Signoff's status lines.

A notice about a request (decision, expired, reminder, escalated) is read here too, from the
payload and the request as it stands (``request_notice_fields``); a channel only says how it
mentions people. A decision notice describes the decision that queued it: its status, vote
count and ``takenOver`` travel in the payload (``engine.domain.notify.card_changed``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from cards.notices import Mention, NoticeKind
from cards.text import agent_text
from cards.view import ApprovalView, decider_text
from engine.domain.model import TakeoverRequest, TakeoverStatus
from engine.domain.quorum import toward_quorum

# People (names from ``people:``) as one channel mentions them; it may leave some out.
Mentions = Callable[[Iterable[str]], list[Mention]]

REQUEST_NOTICES = frozenset(
    {NoticeKind.DECISION, NoticeKind.EXPIRED, NoticeKind.REMINDER, NoticeKind.ESCALATED}
)

SUMMARY_LIMIT = 500


def output_summary(output: Any, limit: int = SUMMARY_LIMIT) -> str | None:
    """A step's output as one short line of text (the full output stays in the journal)."""
    if output is None:
        return None
    text = output if isinstance(output, str) else json.dumps(output, sort_keys=True, default=str)
    text = agent_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def step_result_fields(payload: dict[str, Any], run_id: str | None = None) -> dict[str, Any]:
    ok = bool(payload.get("ok"))
    return {
        "run_id": str(payload.get("runId") or run_id or ""),
        "step_id": str(payload.get("stepId") or ""),
        "ok": ok,
        "error": None if ok else agent_text(str(payload.get("error") or "failed")),
        "output_summary": output_summary(payload.get("output")) if ok else None,
    }


def confidence_fields(payload: dict[str, Any]) -> dict[str, Any]:
    c = payload.get("confidence") or {}
    votes = c.get("votes")
    return {
        "score": float(c.get("score") or 0.0),
        "threshold": float(c.get("threshold") or 0.0),
        "estimator": str(c.get("estimator") or "unknown"),
        "decision": str(c.get("decision") or "divert"),
        "detail": _agent(c.get("error") or c.get("detail")),
        "votes": [bool(v) for v in votes] if isinstance(votes, list) else None,
        "step_id": payload.get("stepId"),
        "node_type": c.get("node_type"),
    }


def _agent(value: Any) -> Any:
    return agent_text(value) if isinstance(value, str) else value


def request_notice_fields(
    kind: NoticeKind,
    request: TakeoverRequest,
    view: ApprovalView,
    payload: Mapping[str, Any],
    mentions: Mentions,
) -> dict[str, Any]:
    """The fields of a notice about ``request`` (a kind in ``REQUEST_NOTICES``). A decision or
    expiry queued with ``requester`` (``engine.domain.notify.card_changed``) mentions them."""
    if kind == NoticeKind.DECISION:
        return {**decision_fields(request, view, payload), **_requester(payload, mentions)}
    if kind == NoticeKind.EXPIRED:
        return {
            "expired_at": request.decided_at or request.expires_at,
            "timeout_behavior": request.timeout_behavior.value,
            "title": view.title,
            **_requester(payload, mentions),
        }
    if kind == NoticeKind.REMINDER:
        voted = {v.person for v in request.votes}
        names = [p for p in payload.get("approvers") or request.approvers if p not in voted]
        return {
            "expires_at": _time(payload.get("expiresAt")) or request.expires_at,
            "title": view.title,
            "approval_url": view.approval_url,
            "quorum": view.quorum if request.approvals_required > 1 else None,
            "mentions": mentions(names),
        }
    if kind == NoticeKind.ESCALATED:
        return {
            "mentions": mentions(payload.get("people") or request.escalate_to),
            "title": view.title,
            "waited_minutes": payload.get("waitedMinutes"),
            "approval_url": view.approval_url,
        }
    raise ValueError(f"{kind} is not a notice about a request")


def _requester(payload: Mapping[str, Any], mentions: Mentions) -> dict[str, Mention]:
    """``{"requester": <mention>}`` when the payload names the person who asked and the
    channel can mention them; else nothing."""
    person = payload.get("requester")
    found = mentions([person]) if isinstance(person, str) and person else []
    return {"requester": found[0]} if found else {}


def queued_decision(
    request: TakeoverRequest, payload: Mapping[str, Any]
) -> tuple[TakeoverStatus, int, bool]:
    """The status, vote count and "taken over" of the decision a notice was queued for; a row
    queued without them (before they travelled in the payload) reads the request as it is."""
    try:
        status, votes = TakeoverStatus(payload["status"]), int(payload["votes"])
    except (KeyError, TypeError, ValueError):
        status, votes = request.status, len(request.votes)
    return status, votes, payload.get("takenOver") is True


def decision_fields(
    request: TakeoverRequest, view: ApprovalView, payload: Mapping[str, Any]
) -> dict[str, Any]:
    """Who did what to ``request`` in the decision that queued this notice, from its record."""
    status, votes, taken_over = queued_decision(request, payload)
    required = request.approvals_required
    if status in (TakeoverStatus.GRANTED, TakeoverStatus.RELEASED):
        votes = toward_quorum(votes, view.overridden)
    quorum = f"{min(votes, required)} of {required} approvals" if required > 1 else None
    actor, verb, at, notes = request.decided_by, "grant", request.decided_at, request.notes
    if status is TakeoverStatus.PENDING and 0 < votes <= len(request.votes):
        vote = request.votes[votes - 1]
        actor, at, notes = vote.person, vote.at, vote.notes
    elif status is TakeoverStatus.GRANTED:
        verb, quorum = "takeover", None
    elif status is TakeoverStatus.RELEASED and (
        taken_over or (request.released_by or actor) != actor
    ):
        verb, actor, at = "release", request.released_by, request.released_at
        quorum, notes = None, None
    elif status is TakeoverStatus.DENIED:
        verb, quorum = "deny", None
    elif status is TakeoverStatus.CANCELLED:
        verb, quorum, notes = "cancel", None, None
    return {
        "actor": decider_text(request, actor) or "someone",
        "verb": verb,
        "status": status.value,
        "notes": notes,
        "at": at,
        "title": view.title,
        "quorum": quorum,
    }


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
