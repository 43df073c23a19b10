"""Which chat messages an event causes. The outbox rows name what to render (a request, a
notice and its data); dispatchers render the current state when they deliver, per platform.
Dedupe keys make a repeated event (a retried transaction, a replayed step) queue nothing new.

Only ``<channel>:<target>`` addresses deliver. An address with no target (a bare name, no
":") is the approval page, which every request has whatever ``channels:`` says: it shows the
current state when opened, so it gets no outbox message. The address table
(``engine.config.channels.CHANNEL_ADDRESSES``) holds one such address; the domain states the
rule rather than importing the table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from engine.domain.model import OutboxMessage, TakeoverRequest


def _deliverable(channels: Iterable[str]) -> list[str]:
    """The addresses that get messages, once each: those with a target (module docstring)."""
    return [c for c in dict.fromkeys(channels) if ":" in c]


def new_card(request: TakeoverRequest) -> list[OutboxMessage]:
    return [
        OutboxMessage(
            channel=channel,
            kind="card",
            dedupe_key=f"card:{request.id}:{channel}",
            payload={"requestId": request.id},
            run_id=request.run_id,
            request_id=request.id,
        )
        for channel in _deliverable(request.channels)
    ]


def card_changed(request: TakeoverRequest, *, taken_over: bool = False) -> list[OutboxMessage]:
    """After a decision or expiry: update the card in place and post a notice in the thread.

    The notice describes the decision that queued it, not whatever the request has become by
    the time it is delivered: its payload carries the status and vote count of that moment, and
    ``takenOver`` when a release hands back a request someone took over (``card_handed_back``)
    rather than approving it. Every channel renders the same fields; the dedupe key (stored,
    deduped against) keeps its shape and is never read back."""
    state = f"{request.status.value}:{len(request.votes)}"
    notice = "expired" if request.status.value == "expired" else "decision"
    payload: dict[str, Any] = {"notice": notice, "requestId": request.id}
    if notice == "decision":
        payload.update(status=request.status.value, votes=len(request.votes))
        if taken_over:
            payload["takenOver"] = True
    out: list[OutboxMessage] = []
    for channel in _deliverable(request.channels):
        out.append(
            OutboxMessage(
                channel=channel,
                kind="card_update",
                dedupe_key=f"update:{request.id}:{channel}:{state}",
                payload={"requestId": request.id},
                run_id=request.run_id,
                request_id=request.id,
            )
        )
        out.append(
            OutboxMessage(
                channel=channel,
                kind="notice",
                dedupe_key=f"notice:{notice}:{request.id}:{channel}:{state}",
                payload=dict(payload),
                run_id=request.run_id,
                request_id=request.id,
            )
        )
    return out


def card_handed_back(request: TakeoverRequest) -> list[OutboxMessage]:
    """``card_changed`` for a release: the request was taken over (granted) and is handed back."""
    return card_changed(request, taken_over=True)


def notice(
    channels: Sequence[str],
    run_id: str,
    kind: str,
    key: str,
    data: dict[str, Any],
    request_id: str | None = None,
) -> list[OutboxMessage]:
    """A thread notice (step result, confidence, reminder, escalation) into each channel."""
    return [
        OutboxMessage(
            channel=channel,
            kind="notice",
            dedupe_key=f"notice:{kind}:{key}:{channel}",
            payload={"notice": kind, **data},
            run_id=run_id,
            request_id=request_id,
        )
        for channel in _deliverable(channels)
    ]
