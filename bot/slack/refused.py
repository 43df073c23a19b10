"""When Slack refuses for good to update a card after a decision, the person who decided is told.

The decision is committed before the card update is even queued, so it stands whatever Slack
says; but a card that keeps its buttons and its "waiting" look, with nobody told why, reads as
a click that did not work. So the sink hands every copy Slack will not change
(``UPDATE_REFUSED``) to ``RefusedUpdates.tell``, which sends the decider an ephemeral message
(``chat.postEphemeral``; the click's ``response_url`` is long gone by then, it is a different
process's), in plain words:

    Approved. I couldn't update the card above (Slack said the message can't be edited); the
    decision stands.

It goes where they clicked, as far as Signoff can know: their own direct-message copy of the
card when there is one, else the channel of the refused card. The stale buttons left on that
card are harmless: a click on them reaches the engine, which answers "Already approved by …;
nothing changed". An expired request has nobody to tell: it is only logged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import aiohttp
from slack_sdk.errors import SlackApiError

from bot.slack.api import SlackApi
from bot.slack.installs import split_target
from engine.assembly import Engine
from engine.config.channels import addressed_person
from engine.domain.model import ChatMessageRef, TakeoverRequest, TakeoverStatus

log = logging.getLogger(__name__)

# What Slack says when it will never apply the update, in the words told to the decider.
UPDATE_REFUSED: dict[str, str] = {
    "cant_update_message": "the message can't be edited",
    "edit_window_closed": "the message is too old to edit",
    "message_not_found": "the message is no longer there",
    "channel_not_found": "Signoff can no longer see that conversation",
    "not_in_channel": "Signoff is no longer in that channel",
    "is_archived": "the channel is archived",
}
_DONE: dict[TakeoverStatus, str] = {
    TakeoverStatus.RELEASED: "Approved",
    TakeoverStatus.DENIED: "Denied",
    TakeoverStatus.GRANTED: "Taken over",
    TakeoverStatus.CANCELLED: "Cancelled",
    TakeoverStatus.PENDING: "Your approval is recorded",
}


def decider(request: TakeoverRequest) -> str | None:
    """Whose click queued the latest update of ``request``: who released, decided, or (still
    pending, a quorum short) cast the last vote. None when nobody clicked (expiry)."""
    if request.status == TakeoverStatus.RELEASED and request.released_by:
        return request.released_by
    if request.status == TakeoverStatus.PENDING:
        return request.votes[-1].person if request.votes else None
    if request.status == TakeoverStatus.EXPIRED:
        return None
    return request.decided_by


def refusal_text(request: TakeoverRequest, code: str, copy: str) -> str:
    """The sentence told to the decider; ``copy`` names the card ("the card above")."""
    done = _DONE.get(request.status, "Decided")
    why = UPDATE_REFUSED.get(code, f"{code}")
    return f"{done}. I couldn't update {copy} (Slack said {why}); the decision stands."


class RefusedUpdates:
    """Tells the decider about a card copy Slack refused to update (module docstring)."""

    def __init__(
        self,
        engine: Engine,
        api: SlackApi,
        target: Callable[[str], Awaitable[str]],
        slack_id: Callable[[str], Awaitable[str | None]],
    ) -> None:
        self.engine = engine
        self.api = api
        self.target = target  # outbox channel -> Slack channel id (the sink's)
        self.slack_id = slack_id  # person -> their Slack user id (the sink's)

    async def tell(self, request_id: str, card: ChatMessageRef, target: str, code: str) -> None:
        """``card`` (in Slack channel ``target``) could not be updated: Slack said ``code``."""
        request = await self.engine.queries.get_takeover(request_id)
        log.warning(
            "Slack refused to update the card %s of %s in %s: %s",
            card.message_ref,
            request_id,
            card.channel,
            code,
        )
        person = decider(request)
        if person is None:
            return
        user_id = await self.slack_id(person)
        if user_id is None:
            return
        where, copy = target, "the card above"
        own = f"{card.channel.partition(':')[0]}:@{person}"
        if card.channel != own:
            cards = await self.engine.chat.messages(request_id=request_id, kind="card")
            if any(m.channel == own for m in cards):
                where = await self.target(own)
                copy = _copy_name(card.channel)
        try:
            user = split_target(user_id)[1]  # tell() takes the workspace from where
            await self.api.tell(where, user, refusal_text(request, code, copy))
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not tell %s that the card was not updated: %s", person, exc)


def _copy_name(channel: str) -> str:
    """How a copy of the card in ``channel`` is named to someone reading it elsewhere."""
    person = addressed_person(channel)
    if person is not None:
        return f"the copy of the card sent to {person}"
    return f"the copy of the card in <#{split_target(channel.partition(':')[2])[1]}>"
