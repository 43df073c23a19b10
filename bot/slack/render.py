"""What an outbox record looks like in Slack: ``{"text", "blocks"}`` from the current state.

The outbox names what to show (a request, a notice and its data); this module reads the
request and run as they are *now* and renders them with ``cards`` (the templates escape every
value). A decision notice is the exception that needs history: it describes the decision that
queued it, whose status and vote count its payload carries (``cards.notice_fields``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from bot.slack.installs import split_target
from bot.views import approval_view
from cards.notice_fields import (
    REQUEST_NOTICES,
    confidence_fields,
    request_notice_fields,
    step_result_fields,
)
from cards.notices import Mention, NoticeKind
from cards.render import render_notice
from cards.slack.limits import check_message
from cards.slack.render import render_slack_card
from cards.view import ApprovalView
from engine.assembly import Engine
from engine.domain.model import OutboxRecord, Run, TakeoverRequest

# Said by a message posted again after an attempt that may have reached Slack unrecorded (a
# crash between ``chat.postMessage`` and the database write; docs/slack.md, "Posted again").
REPOSTED_CARD = (
    "_Posted again: Signoff restarted while posting this card, so an earlier copy may show "
    "above. This copy replaces it and is the one kept up to date; a click on either decides "
    "the same request once._"
)
REPOSTED_NOTICE = (
    "_Posted again: Signoff restarted while posting this message, so an earlier copy may "
    "show above._"
)


def reposted(message: dict[str, Any], note: str) -> dict[str, Any]:
    """``message`` marked as posted again: the note on top of it (in the fallback text too).
    A card already at one of Slack's limits keeps its blocks and carries the note in its text
    only."""
    text = f"{note}\n{message['text']}"
    blocks = message.get("blocks")
    if not blocks:
        return {**message, "text": text}
    context = {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}
    marked = {**message, "text": text, "blocks": [context, *blocks]}
    return marked if not check_message(marked) else {**message, "text": text}


@dataclass(frozen=True)
class Rendered:
    """A Slack message, and what to remember about it once posted (``chat_messages.data``)."""

    message: dict[str, Any]
    data: dict[str, Any]


class Mentions(Protocol):
    """``bot.slack.people.SlackPeople.mention_id``: the user id that mentions a person in a
    workspace, without a call."""

    def mention_id(self, person: str, team: str | None = None) -> str | None: ...


class SlackMessages:
    def __init__(self, engine: Engine, people: Mentions) -> None:
        self.engine = engine
        self.people = people

    def mention(self, person: str, team: str | None = None) -> str:
        """A person's Slack user id (rendered as a mention) in a message of workspace ``team``,
        else their name as text (``Mentions``)."""
        return self.people.mention_id(person, team) or person

    async def view(self, request: TakeoverRequest, run: Run | None = None) -> ApprovalView:
        return await approval_view(self.engine, request, run)

    async def card(self, request_id: str, run: Run | None = None) -> dict[str, Any]:
        request = await self.engine.queries.get_takeover(request_id)
        # A card takes milliseconds of pure Python to render. In a thread, the event loop gets
        # the GIL back every 5 ms (sys.getswitchinterval), so clicks are acknowledged meanwhile.
        return await asyncio.to_thread(render_slack_card, await self.view(request, run))

    async def notice(self, record: OutboxRecord) -> Rendered | None:
        """The notice ``record`` asks for. None: nothing to show (an unknown kind)."""
        payload = record.payload
        kind = payload.get("notice")
        if kind == NoticeKind.STEP_RESULT:
            return self._step_result(payload)
        if kind == NoticeKind.CONFIDENCE:
            return await self._confidence(payload)
        request_id = payload.get("requestId")
        if kind not in REQUEST_NOTICES or not isinstance(request_id, str):
            return None
        request = await self.engine.queries.get_takeover(request_id)
        kind = NoticeKind(kind)
        team = split_target(record.channel.partition(":")[2])[0]
        data = request_notice_fields(
            kind, request, await self.view(request), payload, lambda p: self.mentions(p, team)
        )
        rendered = _notice(kind, data)
        if kind == NoticeKind.DECISION:
            return Rendered(rendered.message, {**rendered.data, "status": data["status"]})
        return rendered

    def mentions(self, people: Iterable[str], team: str | None = None) -> list[Mention]:
        return [self.mention(p, team) for p in people]

    def _step_result(self, payload: dict[str, Any]) -> Rendered:
        return _notice(NoticeKind.STEP_RESULT, step_result_fields(payload))

    async def _confidence(self, payload: dict[str, Any]) -> Rendered:
        run = await self.engine.queries.get_run(str(payload.get("runId", "")))
        return _notice(NoticeKind.CONFIDENCE, {**confidence_fields(payload), "agent": run.agent})


def _notice(kind: str, data: dict[str, Any]) -> Rendered:
    message = render_notice(kind, "slack", **data)
    assert isinstance(message, dict)
    return Rendered(message, {"notice": kind})
