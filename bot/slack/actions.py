"""Card buttons and the deny modal: one engine call per click, committed before the ack.

    signoff_grant     Approve   grant + release in one transaction
    signoff_takeover  Take over grant only; the card then offers Release
    signoff_release   Release   hand the run back
    signoff_deny      Deny      open a modal for the reason; its submission denies
    signoff_feedback_up|down    👍/👎 on a step result: feedback 5 or 1

Who may decide is the engine's business (``Approvals``): a handler maps the Slack user of the
clicker's workspace to a person (``bot.slack.people``: their ``people:`` Slack id in that
workspace, else their email), calls the engine (``bot.replies.decide``), and turns the outcome
into an answer by the kind of refusal (``bot.replies.refusal``). Nothing changes on a refusal;
someone Signoff cannot place is told how to get linked. The card update and the decision notice
are queued by the engine in the decision's own transaction and delivered by the outbox; the
only things a handler sends itself are ephemeral replies to the clicker (through the click's
``response_url``) and the modal, and both go out after the acknowledgement. The same buttons on
a person's Home tab (``bot.slack.home``) reach the same handlers; a click there has no
``response_url``, so its answer is shown on top of the tab, published again.

Double clicks, simultaneous approvers and redelivered requests all reach the engine, whose
conditional UPDATE lets exactly one win; every other click is told who won.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Protocol

import aiohttp
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError

from bot.api.views import approval_url
from bot.replies import UNAVAILABLE, Refusal, decide, refusal, sentence
from bot.slack.api import SlackApi, error_code, http_status
from bot.slack.background import Background
from bot.slack.click import Click, team_of
from bot.slack.people import LookupUnavailable, SlackPeople
from cards.text import Flavor, agent_text, escape_mrkdwn, truncate
from engine.assembly import Engine
from engine.domain.errors import (
    AlreadyDecided,
    SignoffError,
    StoreError,
)
from engine.domain.model import Principal, TakeoverRequest, TakeoverStatus

log = logging.getLogger(__name__)

DENY_CALLBACK = "signoff_deny_reason"
REASON_BLOCK = REASON_ACTION = "reason"
# Slack refuses a plain_text_input with max_length over 3000 (and with it the whole modal), so
# a reason typed in Slack is at most 3000 characters; the API's limit stays MAX_NOTES (4000).
MAX_REASON = 3000
NOT_LINKED = (  # at most 150 characters for a Slack id of 11: it is a modal's error too
    "Signoff doesn't know you on Slack; nothing changed. Ask a Signoff admin to add your "
    "Slack id ({user}) or email under people: in app.yaml."
)
NOT_LOOKED_UP = (
    "Signoff couldn't ask Slack who you are just now, so nothing changed. Please try again."
)
# How a decided request is described to someone who clicked too late.
_DECIDED: dict[str, str] = {
    TakeoverStatus.GRANTED.value: "taken over",
    TakeoverStatus.RELEASED.value: "approved",
    TakeoverStatus.DENIED.value: "denied",
    TakeoverStatus.CANCELLED.value: "cancelled",
}


class HomeTabs(Protocol):
    """What a click asks of the Home tabs (``bot.slack.home``): show its clicker the outcome."""

    def refresh(self, user_id: str, notice: str | None = None) -> None: ...


class Interactions:
    def __init__(
        self,
        engine: Engine,
        api: SlackApi,
        background: Background,
        people: SlackPeople,
        home: HomeTabs | None = None,
    ) -> None:
        self.engine = engine
        self.api = api
        self.background = background
        self.people = people
        self.home = home

    def register(self, app: AsyncApp) -> None:
        app.action("signoff_grant")(self.grant)
        app.action("signoff_takeover")(self.takeover)
        app.action("signoff_release")(self.release)
        app.action("signoff_deny")(self.deny_clicked)
        app.view(DENY_CALLBACK)(self.deny_submitted)
        app.action(re.compile(r"^signoff_feedback_(up|down)$"))(self.feedback)

    # -- buttons -------------------------------------------------------------------------------

    async def grant(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await self._decide(ack, Click.of(body), "grant")

    async def takeover(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await self._decide(ack, Click.of(body), "takeover")

    async def release(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await self._decide(ack, Click.of(body), "release")

    async def _decide(self, ack: AsyncAck, click: Click, verb: str) -> None:
        """Commit the decision, then acknowledge (the HTTP answer leaves when this returns)."""
        who, reply = await self._principal(click.team_id, click.user_id)
        if who is not None:
            try:
                await decide(self.engine.approvals, click.value, who, verb)
            except SignoffError as exc:
                kind = refusal(exc)
                if kind is Refusal.DECIDED:
                    assert isinstance(exc, AlreadyDecided)
                    reply = self._already(exc.current, exc.decided_by, team=click.workspace)
                elif kind is Refusal.NOT_TAKEN_OVER:  # release of a request that is not granted
                    reply = await self._state_of(click.value, click.workspace)
                elif kind is Refusal.VOTED:
                    reply = (
                        "You have already approved this request; it is waiting for more approvals."
                    )
                elif kind is Refusal.UNAVAILABLE:
                    log.warning("Slack %s of %s not recorded: %s", verb, click.value, exc)
                    reply = UNAVAILABLE
                elif kind is not None:
                    reply = _sentence(exc.message)
                else:
                    raise
        await ack()
        self._tell(click, reply, decided=reply is None)

    async def deny_clicked(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """Deny asks for a reason first: check the clicker may deny, then open the modal."""
        click = Click.of(body)
        who, reply = await self._principal(click.team_id, click.user_id)
        request: TakeoverRequest | None = None
        if who is not None:
            try:
                request = await self.engine.queries.get_takeover(click.value)
            except SignoffError as exc:
                reply = UNAVAILABLE if isinstance(exc, StoreError) else _sentence(exc.message)
            if request is not None:
                refusal = self.engine.approvals.refusal(request, who, "deny")
                if refusal is not None:
                    reply = _sentence(refusal)
                elif request.status != TakeoverStatus.PENDING:
                    reply = self._already(
                        request.status.value, request.decided_by, team=click.workspace
                    )
        await ack()
        if reply is None and request is not None:
            self.background.spawn(
                self._open_modal(click, request),
                "deny-modal",
                on_failure=lambda _: self._tell(
                    click, self._not_opened(request.id, "something went wrong in Signoff")
                ),
            )
        self._tell(click, reply)

    async def _open_modal(self, click: Click, request: TakeoverRequest) -> None:
        """``views.open`` of the reason dialog. When Slack does not open it (the trigger
        expired, a view limit, an outage answering 5xx in HTML) the clicker is told so, with
        the approval page to deny from instead: a silent failure would leave them looking at
        nothing while the request stays pending. Anything else that breaks here is told too,
        by ``Background`` (``on_failure``)."""
        try:
            if not click.trigger_id:
                raise ValueError("the click carried no trigger_id")
            await self.api.open_view(click.trigger_id, deny_modal(request), team=click.workspace)
            return
        except SlackApiError as exc:
            log.warning(
                "the deny dialog for %s did not open: HTTP %s %s",
                request.id,
                http_status(exc),
                error_code(exc),
            )
            why = _why_not_opened(exc)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("the deny dialog for %s did not open: %r", request.id, exc)
            why = "Slack did not answer"
        except ValueError:
            log.warning("the deny dialog for %s did not open: no trigger_id", request.id)
            why = "the click carried no dialog trigger"
        self._tell(click, self._not_opened(request.id, why))

    def _not_opened(self, request_id: str, why: str) -> str:
        page = approval_url(self.engine.config.server.public_url, request_id)
        return (
            f"Slack didn't open the Deny dialog ({why}). Nothing was decided — try Deny "
            f"again, or deny on the approval page: <{escape_mrkdwn(page)}|open it>."
        )

    async def deny_submitted(
        self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any]
    ) -> None:
        """The modal's submission: deny with the reason, or show why not inside the modal."""
        request_id = str(view.get("private_metadata", ""))
        values = (view.get("state") or {}).get("values") or {}
        reason = ((values.get(REASON_BLOCK) or {}).get(REASON_ACTION) or {}).get("value")
        user_id, team = str((body.get("user") or {}).get("id", "")), team_of(body)
        who, error = await self._principal(team, user_id)
        if who is not None:
            try:
                notes = (reason or "").strip() or None
                await decide(self.engine.approvals, request_id, who, "deny", notes)
            except SignoffError as exc:
                kind = refusal(exc)
                if kind is Refusal.DECIDED:
                    assert isinstance(exc, AlreadyDecided)
                    error = self._already(exc.current, exc.decided_by, mention=False)
                elif kind is Refusal.UNAVAILABLE:
                    error = UNAVAILABLE
                elif kind is not None:
                    error = _sentence(exc.message)
                else:
                    raise
        if error is None:
            await ack()  # closes the modal
            if self.home is not None:
                self.home.refresh(self.api.member(team, user_id))
        else:
            await ack(response_action="errors", errors={REASON_BLOCK: error[:150]})

    async def feedback(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """👍/👎 under a step result: journaled as feedback 5 or 1 (it feeds calibration)."""
        click = Click.of(body)
        who, unknown = await self._principal(click.team_id, click.user_id)
        run_id, _, step_id = click.value.partition(":")
        up = click.action_id.endswith("_up")
        reply = unknown or ""
        if who is not None:
            try:
                await self.engine.gate.record_feedback(run_id, step_id, 5 if up else 1, None, who)
                reply = f"Thanks, your {'👍' if up else '👎'} on this step was recorded."
            except StoreError:
                reply = UNAVAILABLE
            except SignoffError as exc:
                reply = _sentence(exc.message)
        await ack()
        self._tell(click, reply)

    # -- helpers -------------------------------------------------------------------------------

    async def _principal(
        self, team: str | None, slack_user: str
    ) -> tuple[Principal | None, str | None]:
        """The person the clicker (``slack_user`` of workspace ``team``) is
        (``bot.slack.people``), or None and what to tell them."""
        try:
            person = await self.people.person_for(slack_user, team)
        except LookupUnavailable as exc:
            log.warning("could not look up Slack user %s: %s", slack_user[:40], exc)
            return None, NOT_LOOKED_UP
        if person is None:
            return None, NOT_LINKED.format(user=escape_mrkdwn(slack_user[:40] or "unknown"))
        return self.engine.principal_for_person(person.name), None

    def _already(
        self, status: str | None, by: str | None, *, mention: bool = True, team: str | None = None
    ) -> str:
        """ "Already approved by @x", as the clicker who lost the race is told."""
        if status == TakeoverStatus.EXPIRED:
            return "This request has already expired; nothing changed."
        word = _DECIDED.get(status or "", status or "decided")
        if by is None:
            return f"This request is already {word}; nothing changed."
        return f"Already {word} by {self._person(by, mention, team)}; nothing changed."

    async def _state_of(self, request_id: str, team: str | None) -> str:
        try:
            request = await self.engine.queries.get_takeover(request_id)
        except SignoffError:
            return UNAVAILABLE
        if request.status == TakeoverStatus.PENDING:
            return "This request has not been taken over, so there is nothing to release."
        by = request.released_by or request.decided_by
        if request.status == TakeoverStatus.RELEASED:
            return (
                f"Already released by {self._person(by or 'someone', True, team)}; nothing changed."
            )
        return self._already(request.status.value, by, team=team)

    def _person(self, name: str, mention: bool, team: str | None = None) -> str:
        """``name`` as an @mention where their Slack id is of workspace ``team`` (or names
        none), else as text."""
        if mention and (user_id := self.people.mention_id(name, team)):
            return f"<@{user_id}>"
        return truncate(name, 100, Flavor.MRKDWN if mention else Flavor.PLAIN)

    def _tell(self, click: Click, text: str | None, *, decided: bool = False) -> None:
        """An ephemeral answer to the clicker, sent after the acknowledgement. A click on the
        Home tab has no ``response_url``: its tab is published again, with ``text`` on top."""
        if click.in_home and self.home is not None:
            if text is not None or decided:
                self.home.refresh(self.api.member(click.team_id, click.user_id), text)
            return
        if text is None:
            return
        if not click.response_url:
            log.info("no response_url to tell %s: %s", click.user_id, text)
            return
        self.background.spawn(self.api.respond(click.response_url, text), "ephemeral")


def deny_modal(request: TakeoverRequest) -> dict[str, Any]:
    """The reason dialog; ``private_metadata`` carries the request id to its submission."""
    required = request.deny_reason_required
    return {
        "type": "modal",
        "callback_id": DENY_CALLBACK,
        "private_metadata": request.id,
        "title": {"type": "plain_text", "text": "Deny request"},
        "submit": {"type": "plain_text", "text": "Deny"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "verbatim": True,
                    # One line, quoted if it reads like a status line: as the card shows it.
                    "text": truncate(agent_text(request.reason or request.id), 2900, Flavor.MRKDWN),
                },
            },
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": not required,
                "label": {
                    "type": "plain_text",
                    "text": "Reason (required)" if required else "Reason (optional)",
                },
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_ACTION,
                    "multiline": True,
                    "max_length": MAX_REASON,
                },
            },
        ],
    }


def _why_not_opened(exc: SlackApiError) -> str:
    """Why Slack did not open a dialog, in the clicker's words (Slack's code only when it is
    Slack's own refusal)."""
    status, code = http_status(exc), error_code(exc)
    if code in ("expired_trigger_id", "exchanged_trigger_id"):
        return "the click reached it too late"
    if status == 429 or code == "ratelimited":
        return "it is busy and asked us to slow down"
    if status is not None and status >= 500:
        return "it answered with a server error"
    if code == "unknown_error":
        return f"it answered with an error, HTTP {status or '?'}"
    return f"it refused it: {code}"


def _sentence(message: str) -> str:
    """An engine message as a sentence to show, escaped for mrkdwn (it may quote an id from
    the payload)."""
    return sentence(message, lambda text: truncate(text, 500, Flavor.MRKDWN))
