"""What the bot posts in Teams, rendered from the engine's current state at the moment it is
sent: approval cards, the thread notices beside them, and short text replies.

Outbox rows only name what to show (``{"requestId"}``, ``{"notice", ...}``); reading the
request again here means a late delivery never shows a stale card. The renderers live in
``cards/``; this module only gathers their inputs (the view, the notice fields, who to
@mention) and wraps the result as an ``Outgoing`` message.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

from bot.api.views import approval_url
from bot.teams.activities import Outgoing
from cards.notice_fields import confidence_fields, step_result_fields
from cards.render import render_notice, render_teams_card, teams_mention_activity
from cards.view import ApprovalView, build_view, decider_text
from engine.assembly import Engine
from engine.domain.errors import NotFound
from engine.domain.model import OutboxRecord, TakeoverRequest, TakeoverStatus

_RENDERED_MAX = 512
# Per engine: two engines in one process (tests, a replica per database) may hold requests of
# the same id in different databases, and one must never be shown the other's card.
_rendered: WeakKeyDictionary[Engine, OrderedDict[tuple[Any, ...], dict[str, Any]]] = (
    WeakKeyDictionary()
)


async def approval_view(engine: Engine, request: TakeoverRequest) -> ApprovalView:
    try:
        run = await engine.queries.get_run(request.run_id)
    except NotFound:
        run = None
    return build_view(
        request,
        run,
        approval_url=approval_url(engine.config.server.public_url, request.id),
        run_url=None,
        now=engine.clock.now(),
    )


async def approval_card(engine: Engine, request: TakeoverRequest) -> dict[str, Any]:
    """The Adaptive Card for ``request`` as it stands now (treat it as read-only).

    A decision renders the same card twice, once for the clicker's invoke response and once
    for the update everyone sees; rendering costs milliseconds (the card is measured and then
    filled), so recent renders are kept, keyed by everything of the request that the Teams card
    shows and that can change. (The card shows no relative time and no run status.)"""
    key = (
        request.id,
        request.status,
        tuple(request.votes),
        request.decided_by,
        request.decided_at,
        request.released_by,
        request.released_at,
        request.notes,
    )
    rendered = _rendered.setdefault(engine, OrderedDict())
    card = rendered.get(key)
    if card is None:
        card = render_teams_card(await approval_view(engine, request))
        rendered[key] = card
        while len(rendered) > _RENDERED_MAX:
            rendered.popitem(last=False)
    return card


def with_banner(card: dict[str, Any], text: str) -> dict[str, Any]:
    """``card`` with a line on top, for one person's eyes (a refusal, "already decided")."""
    banner = {
        "type": "RichTextBlock",
        "inlines": [{"type": "TextRun", "text": text, "weight": "Bolder", "color": "Attention"}],
    }
    return {**card, "body": [banner, *card.get("body", [])]}


def text_card(text: str) -> dict[str, Any]:
    """A reply as a card, one line per paragraph. Its text goes into ``TextRun``s, which
    Teams never reads as markdown: names and values typed by people show as typed."""
    body = [
        {"type": "RichTextBlock", "inlines": [{"type": "TextRun", "text": line}]}
        for line in text.splitlines()
        if line.strip()
    ]
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": "1.5",
        "fallbackText": text[:300],
        "body": body,
    }


def reply(text: str) -> Outgoing:
    return Outgoing(card=text_card(text))


async def notice_message(engine: Engine, record: OutboxRecord) -> Outgoing | None:
    """The thread notice an outbox row asks for; None when there is nothing to say.

    Payloads (``engine.domain.notify``, ``engine.services.reminders``): ``decision``/``expired``
    {requestId}; ``step_result`` {runId, stepId, ok, output|error}; ``confidence`` {runId, stepId,
    confidence}; ``reminder`` {requestId, expiresAt, approvers}; ``escalated`` {requestId,
    people, waitedMinutes}. People named in reminders and escalations are @mentioned."""
    payload = record.payload
    kind = str(payload.get("notice", ""))
    if kind == "step_result":
        return _render(kind, step_result_fields(record.payload, record.run_id))
    if kind == "confidence":
        return _render(kind, confidence_fields(payload))
    request = await _request(engine, payload.get("requestId") or record.request_id)
    if request is None or kind not in ("decision", "expired", "reminder", "escalated"):
        return None
    view = await approval_view(engine, request)
    if kind == "decision":
        status, votes = _queued_state(record, request)
        taken_over = status is TakeoverStatus.RELEASED and await _was_taken_over(engine, record)
        return _render(kind, _decision(request, view, status, votes, taken_over=taken_over))
    data: dict[str, Any]
    if kind == "expired":
        data = {
            "expired_at": request.decided_at or request.expires_at,
            "timeout_behavior": request.timeout_behavior.value,
            "title": view.title,
        }
        return _render(kind, data)
    if kind == "reminder":
        voted = {v.person for v in request.votes}
        names = [p for p in payload.get("approvers") or request.approvers if p not in voted]
        mentions = _mentions(engine, names)
        data = {
            "expires_at": _time(payload.get("expiresAt")) or request.expires_at,
            "title": view.title,
            "approval_url": view.approval_url,
            "quorum": view.quorum if request.approvals_required > 1 else None,
            "mentions": mentions,
        }
    else:
        mentions = _mentions(engine, payload.get("people") or request.escalate_to)
        data = {
            "mentions": mentions,
            "title": view.title,
            "waited_minutes": payload.get("waitedMinutes"),
            "approval_url": view.approval_url,
        }
    return _render(kind, data, mentions)


def _render(kind: str, data: dict[str, Any], mentions: Sequence[dict[str, str]] = ()) -> Outgoing:
    card = render_notice(kind, "teams", **data)
    assert isinstance(card, dict)
    if not mentions:
        return Outgoing(card=card)
    # Real @mentions ride on the activity, not in the card (cards.render docs).
    activity = teams_mention_activity(mentions)
    return Outgoing(text=activity["text"], card=card, mentions=tuple(activity["entities"]))


async def _request(engine: Engine, request_id: Any) -> TakeoverRequest | None:
    if not request_id:
        return None
    try:
        return await engine.queries.get_takeover(str(request_id))
    except NotFound:
        return None


def _queued_state(record: OutboxRecord, request: TakeoverRequest) -> tuple[TakeoverStatus, int]:
    """The status and vote count a decision notice was queued for. ``engine.domain.notify`` writes
    them into the dedupe key (``notice:decision:<id>:<channel>:<status>:<votes>``), not the
    payload; the notice describes that decision, not whatever the request has become since."""
    _, status_text, votes_text = record.dedupe_key.rsplit(":", 2)
    try:
        return TakeoverStatus(status_text), int(votes_text)
    except ValueError:
        return request.status, len(request.votes)


async def _was_taken_over(engine: Engine, record: OutboxRecord) -> bool:
    """Whether a released request went through "taken over" first (then its release is a
    hand-back, not an approval): a decision notice was queued for its ``granted`` state."""
    if record.run_id is None:
        return False
    prefix = f"notice:decision:{record.request_id}:{record.channel}:granted:"
    queued = await engine.queries.outbox_messages(run_id=record.run_id)
    return any(m.dedupe_key.startswith(prefix) for m, _, _ in queued)


def _decision(
    request: TakeoverRequest,
    view: ApprovalView,
    status: TakeoverStatus,
    votes: int,
    *,
    taken_over: bool,
) -> dict[str, Any]:
    required = request.approvals_required
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
        verb, actor, at, quorum, notes = (
            "release",
            request.released_by,
            request.released_at,
            None,
            None,
        )
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


def _mentions(engine: Engine, people: Iterable[str]) -> list[dict[str, str]]:
    """People with a Teams identity, as ``{"id": <AAD object id>, "name"}`` (Teams accepts the
    AAD object id as a mention's id)."""
    out = []
    for name in people:
        person = engine.config.people.get(name)
        if person is not None and person.teams:
            out.append({"id": person.teams, "name": name})
    return out


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
