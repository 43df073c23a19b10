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
from typing import Any
from weakref import WeakKeyDictionary

from bot.teams.activities import Outgoing
from bot.views import approval_view
from cards.notice_fields import (
    REQUEST_NOTICES,
    confidence_fields,
    request_notice_fields,
    step_result_fields,
)
from cards.notices import Mention, NoticeKind
from cards.render import render_notice
from cards.teams.render import render_teams_card, teams_mention_activity
from engine.assembly import Engine
from engine.domain.errors import NotFound
from engine.domain.model import OutboxRecord, TakeoverRequest

_RENDERED_MAX = 512
# Per engine: two engines in one process (tests, a replica per database) may hold requests of
# the same id in different databases, and one must never be shown the other's card.
_rendered: WeakKeyDictionary[Engine, OrderedDict[tuple[Any, ...], dict[str, Any]]] = (
    WeakKeyDictionary()
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

    Payloads (``engine.domain.notify``, ``engine.services.reminders``): ``decision``
    {requestId, status, votes, takenOver?}; ``expired`` {requestId}; ``step_result`` {runId,
    stepId, ok, output|error}; ``confidence`` {runId, stepId, confidence}; ``reminder``
    {requestId, expiresAt, approvers}; ``escalated`` {requestId, people, waitedMinutes}.
    People named in reminders and escalations, and the requester told of an outcome, are
    @mentioned."""
    payload = record.payload
    kind = str(payload.get("notice", ""))
    if kind == "step_result":
        return _render(kind, step_result_fields(record.payload, record.run_id))
    if kind == "confidence":
        return _render(kind, confidence_fields(payload))
    request = await _request(engine, payload.get("requestId") or record.request_id)
    if request is None or kind not in REQUEST_NOTICES:
        return None
    view = await approval_view(engine, request)
    notice = NoticeKind(kind)
    data = request_notice_fields(notice, request, view, payload, lambda p: _mentions(engine, p))
    mentioned = data.get("mentions") or ([data["requester"]] if data.get("requester") else [])
    return _render(kind, data, mentioned)


def _render(kind: str, data: dict[str, Any], mentions: Sequence[Mention] = ()) -> Outgoing:
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


def _mentions(engine: Engine, people: Iterable[str]) -> list[Mention]:
    """People with a Teams identity, as ``{"id": <AAD object id>, "name"}`` (Teams accepts the
    AAD object id as a mention's id)."""
    out: list[Mention] = []
    for name in people:
        person = engine.config.people.get(name)
        if person is not None and (aad := person.ids.get("teams")):
            out.append({"id": aad, "name": name})
    return out
