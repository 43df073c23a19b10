"""Which chat messages an event causes. The outbox rows name what to render (a request, a
notice and its data); dispatchers render the current state when they deliver, per platform.
Dedupe keys make a repeated event (a retried transaction, a replayed step) queue nothing new.

Only ``<channel>:<target>`` addresses deliver. An address with no target (a bare name, no
":") is the approval page, which every request has whatever ``channels:`` says: it shows the
current state when opened, so it gets no outbox message. The address table
(``engine.config.channels.CHANNEL_ADDRESSES``) holds one such address; the domain states the
rule rather than importing the table.

The person who asked (``TakeoverRequest.requested_by``) is told how their request ended:
approved, denied or expired. Where is fixed when the request is made, from the configuration
(``engine.config.channels.requester.requester_channels``), and kept in its ``details``
(``REQUESTER``): once per channel kind the card went to, in a shared place where the card is
(the decision's own notice there says so, mentioning them), else in their own chat with the
bot. Someone who ended it themselves is not told what they just did."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from engine.domain.model import OutboxMessage, TakeoverRequest, TakeoverStatus

# ``details["requester"]``: {"person": <name in people:>, "channels": [<address>, ...]}.
REQUESTER = "requester"
# The ends a requester is told of, and who brought each about (None: nobody, it expired).
_TOLD: dict[TakeoverStatus, str | None] = {
    TakeoverStatus.RELEASED: "released_by",
    TakeoverStatus.DENIED: "decided_by",
    TakeoverStatus.EXPIRED: None,
}


def _deliverable(channels: Iterable[str]) -> list[str]:
    """The addresses that get messages, once each: those with a target (module docstring)."""
    return [c for c in dict.fromkeys(channels) if ":" in c]


def with_requester(request: TakeoverRequest, channels: Sequence[str]) -> TakeoverRequest:
    """``request`` keeping where its requester is told its outcome (``channels``, from the
    configuration); unchanged when they are told nowhere."""
    if not channels or request.requested_by is None:
        return request
    told = {"person": request.requested_by, "channels": list(dict.fromkeys(channels))}
    return dataclasses.replace(request, details={**request.details, REQUESTER: told})


def requester(request: TakeoverRequest) -> tuple[str, list[str]] | None:
    """Who is told how ``request`` ended, and where; None when nobody is: it has not ended (or
    was cancelled with its run), nobody was recorded, or they ended it themselves."""
    told = request.details.get(REQUESTER)
    if request.status not in _TOLD or not isinstance(told, dict):
        return None
    person, channels = told.get("person"), told.get("channels")
    if not isinstance(person, str) or not isinstance(channels, list):
        return None
    by = _TOLD[request.status]
    if by is not None and getattr(request, by) == person:
        return None
    return person, [c for c in channels if isinstance(c, str) and ":" in c]


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
    deduped against) keeps its shape and is never read back.

    When the request has ended, the notice in each of its requester's places carries
    ``requester`` (they are mentioned in it): one message in the thread, not a second one
    beside it. Their own chat, when the card is not there, gets that notice alone."""
    state = f"{request.status.value}:{len(request.votes)}"
    notice = "expired" if request.status.value == "expired" else "decision"
    payload: dict[str, Any] = {"notice": notice, "requestId": request.id}
    if notice == "decision":
        payload.update(status=request.status.value, votes=len(request.votes))
        if taken_over:
            payload["takenOver"] = True
    told = requester(request)
    person, places = told if told is not None else (None, [])
    out: list[OutboxMessage] = []

    def notice_to(channel: str) -> OutboxMessage:
        mentioned = {"requester": person} if channel in places else {}
        return OutboxMessage(
            channel=channel,
            kind="notice",
            dedupe_key=f"notice:{notice}:{request.id}:{channel}:{state}",
            payload={**payload, **mentioned},
            run_id=request.run_id,
            request_id=request.id,
        )

    channels = _deliverable(request.channels)
    for channel in channels:
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
        out.append(notice_to(channel))
    out.extend(notice_to(channel) for channel in places if channel not in channels)
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
