"""What an outbox record looks like in Slack: ``{"text", "blocks"}`` from the current state.

The outbox names what to show (a request, a notice and its data); this module reads the
request and run as they are *now* and renders them with ``cards`` (the templates escape every
value). A decision notice is the exception that needs history: it describes the decision that
queued it, which its dedupe key records (``notice:decision:<request>:<channel>:<status>:<votes>``,
see ``engine.domain.notify.card_changed``), not whatever the request has become since.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.api.views import approval_url
from cards.notice_fields import confidence_fields, step_result_fields
from cards.notices import NoticeKind
from cards.render import render_notice, render_slack_card
from cards.view import ApprovalView, build_view, decider_text
from engine.assembly import Engine
from engine.domain.model import ChatMessageRef, OutboxRecord, Run, TakeoverRequest, TakeoverStatus


@dataclass(frozen=True)
class Rendered:
    """A Slack message, and what to remember about it once posted (``chat_messages.data``)."""

    message: dict[str, Any]
    data: dict[str, Any]


class SlackMessages:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def mention(self, person: str) -> str:
        """A person's Slack user id (rendered as a mention), else their name as text."""
        found = self.engine.config.people.get(person)
        return found.slack if found is not None and found.slack else person

    async def view(self, request: TakeoverRequest, run: Run | None = None) -> ApprovalView:
        if run is None or run.id != request.run_id:
            run = await self.engine.queries.get_run(request.run_id)
        public_url = self.engine.config.server.public_url
        return build_view(
            request,
            run,
            approval_url=approval_url(public_url, request.id),
            run_url=None,
            now=self.engine.clock.now(),
        )

    async def card(self, request_id: str, run: Run | None = None) -> dict[str, Any]:
        request = await self.engine.queries.get_takeover(request_id)
        # A card takes milliseconds of pure Python to render. In a thread, the event loop gets
        # the GIL back every 5 ms (sys.getswitchinterval), so clicks are acknowledged meanwhile.
        return await asyncio.to_thread(render_slack_card, await self.view(request, run))

    async def notice(
        self, record: OutboxRecord, earlier: Sequence[ChatMessageRef]
    ) -> Rendered | None:
        """The notice ``record`` asks for; ``earlier``: our messages already in this channel for
        the same request. None: nothing to show (an unknown kind)."""
        payload = record.payload
        kind = payload.get("notice")
        if kind == NoticeKind.STEP_RESULT:
            return self._step_result(payload)
        if kind == NoticeKind.CONFIDENCE:
            return await self._confidence(payload)
        request_id = payload.get("requestId")
        if kind not in {k.value for k in NoticeKind} or not isinstance(request_id, str):
            return None
        request = await self.engine.queries.get_takeover(request_id)
        view = await self.view(request)
        if kind == NoticeKind.DECISION:
            return _decision(request, view, record.dedupe_key, earlier)
        if kind == NoticeKind.EXPIRED:
            data: dict[str, Any] = {
                "expired_at": request.decided_at or request.expires_at,
                "timeout_behavior": request.timeout_behavior.value,
                "title": view.title,
            }
        elif kind == NoticeKind.REMINDER:
            voted = {v.person for v in request.votes}
            names = [p for p in payload.get("approvers") or request.approvers if p not in voted]
            data = {
                "expires_at": _time(payload.get("expiresAt")) or request.expires_at,
                "title": view.title,
                "approval_url": view.approval_url,
                "quorum": view.quorum if request.approvals_required > 1 else None,
                "mentions": [self.mention(p) for p in names],
            }
        else:  # escalated
            data = {
                "mentions": [self.mention(p) for p in payload.get("people") or ()],
                "title": view.title,
                "waited_minutes": payload.get("waitedMinutes"),
                "approval_url": view.approval_url,
            }
        return _notice(kind, data)

    def _step_result(self, payload: dict[str, Any]) -> Rendered:
        return _notice(NoticeKind.STEP_RESULT, step_result_fields(payload))

    async def _confidence(self, payload: dict[str, Any]) -> Rendered:
        run = await self.engine.queries.get_run(str(payload.get("runId", "")))
        return _notice(NoticeKind.CONFIDENCE, {**confidence_fields(payload), "agent": run.agent})


def _notice(kind: str, data: dict[str, Any]) -> Rendered:
    message = render_notice(kind, "slack", **data)
    assert isinstance(message, dict)
    return Rendered(message, {"notice": kind})


def _decision(
    request: TakeoverRequest,
    view: ApprovalView,
    dedupe_key: str,
    earlier: Sequence[ChatMessageRef],
) -> Rendered:
    """The decision that queued this notice, described from the request's current record."""
    _, status_text, votes_text = dedupe_key.rsplit(":", 2)
    try:
        status, votes = TakeoverStatus(status_text), int(votes_text)
    except ValueError:
        status, votes = request.status, len(request.votes)
    required = request.approvals_required
    quorum = f"{min(votes, required)} of {required} approvals" if required > 1 else None
    took_over = any(
        m.kind == "notice" and m.data.get("status") == TakeoverStatus.GRANTED.value for m in earlier
    )
    actor, verb, at, notes = request.decided_by, "grant", request.decided_at, request.notes
    if status == TakeoverStatus.PENDING and 0 < votes <= len(request.votes):
        vote = request.votes[votes - 1]
        actor, at, notes = vote.person, vote.at, vote.notes
    elif status == TakeoverStatus.GRANTED:
        verb, quorum = "takeover", None
    elif status == TakeoverStatus.RELEASED and (
        took_over or (request.released_by or actor) != actor
    ):
        verb, actor, at = "release", request.released_by, request.released_at
        quorum, notes = None, None
    elif status == TakeoverStatus.DENIED:
        verb, quorum = "deny", None
    elif status == TakeoverStatus.CANCELLED:
        verb, quorum, notes = "cancel", None, None
    message = render_notice(
        NoticeKind.DECISION,
        "slack",
        actor=decider_text(request, actor) or "someone",
        verb=verb,
        status=status.value,
        notes=notes,
        at=at,
        title=view.title,
        quorum=quorum,
    )
    assert isinstance(message, dict)
    return Rendered(message, {"notice": NoticeKind.DECISION.value, "status": status.value})


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
