"""What the bot does with each incoming Teams activity: translate it into one engine call as
the person who acted, and the engine's answer into a card or a reply.

    conversationUpdate / installationUpdate  store the conversation reference (bot installed);
                                             in a personal chat, as the person's (``personal``)
    message "pending"                        the person's pending approvals (personal chat)
    message "away ..."                       away with a delegate, back, or whether (``bot.away``)
    message "subscribe <name>"               name this conversation teams:<name> (admins)
    message "gate ..." / "help"              the shared admin commands (engine.gate.commands)
    invoke adaptiveCard/action               grant | deny | takeover | release | refresh

People are found by their Azure AD object id in ``people:``; authorization is the engine's
(``Approvals``), the same for Teams, Slack, the API and the web page. A refused click changes
nothing: the clicker alone gets the card back with the reason on top (an invoke response is
seen only by the person who clicked). Everyone else sees decisions when the outbox updates the
message (``card_update``), which also keeps those updates within Teams' rate limits.

Replies to messages (command confirmations, usage lines) go through the outbox too, as
``reply`` rows addressed to the conversation (and channel thread) the message came from: sent
when the conversation's rate budget allows, retried after a 429, never dropped.
"""

from __future__ import annotations

import html
import logging
import re
from typing import Any

from bot.away import VERB as AWAY
from bot.away import answer_away, by_name_or_email
from bot.replies import NO_REQUEST, NOTHING_CHANGED, VERBS, Refusal, decide, refusal
from bot.teams.activities import ADAPTIVE_CARD, Incoming, InvokeReply, Outgoing, TurnReply
from bot.teams.messages import approval_card, with_banner
from bot.teams.personal import HELP_LINES, PersonalChat, reply_channel
from cards.view import override_warning
from engine.assembly import Engine
from engine.config.sections import Person
from engine.domain.approvers import override_of
from engine.domain.errors import AlreadyDecided, InvalidRequest, NotFound, SignoffError
from engine.domain.model import OutboxMessage, TakeoverRequest
from engine.gate.commands import HELP_TEXT, run_command

log = logging.getLogger(__name__)

PLATFORM = "teams"
REPLY = "reply"  # the outbox kind of a reply to a message
# The outbox channel of replies into one conversation: "teams:reply/<conversation id>"
# (``personal.reply_channel``). It is no conversation name (those have no "/"); it only keeps
# one conversation's replies in order.
CARD_ACTION = "adaptiveCard/action"
CONVERSATION_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}\Z")
_MENTIONS = re.compile(r"<at>.*?</at>", re.IGNORECASE | re.DOTALL)
_TAGS = re.compile(r"<[^>]{0,200}>")
_SUBSCRIBE_USAGE = "Usage: subscribe <name> (lowercase letters, digits, _ . -; up to 64)"
EACH_APPROVER = "dm"  # teams:dm is each approver's personal chat, never a conversation's name
_NOT_DM = (
    "teams:dm sends each approver the card in their own personal chat, so no conversation can "
    "be named dm; pick another name. Nothing changed."
)


class TeamsHandlers:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.personal = PersonalChat(engine, self._say)

    async def on_activity(self, incoming: Incoming) -> TurnReply:
        if incoming.type in ("conversationUpdate", "installationUpdate"):
            if incoming.bot_added:
                await self._remember(incoming)
                await self.personal.installed(incoming, self._person(incoming))
            return TurnReply()
        if incoming.type == "message":
            return await self._message(incoming)
        if incoming.type == "invoke":
            if incoming.name == CARD_ACTION:
                return TurnReply(invoke=await self._card_action(incoming))
            return TurnReply(invoke=_error(501, "NotSupported", f"invoke {incoming.name}"))
        return TurnReply()

    # -- installation and messages -------------------------------------------------------------

    async def _remember(self, incoming: Incoming) -> None:
        await self.engine.chat.remember_conversation(
            PLATFORM, incoming.conversation_id, incoming.reference, self.engine.clock.now()
        )

    async def _message(self, incoming: Incoming) -> TurnReply:
        text = command_text(incoming.text)
        if not text:
            return TurnReply()
        person = self._person(incoming)
        if person is None:
            return await self._say(
                incoming,
                "I don't know you yet: an admin adds your Azure AD object id "
                f"({incoming.sender_aad or 'unknown'}) to people: in app.yaml.",
            )
        who = self.engine.principal_for_person(person.name)
        words = text.split()
        first = words[0].lower()
        if first == "pending" and len(words) == 1:
            await self.personal.pending(incoming, person)
            return TurnReply()
        await self.personal.remember(incoming)  # any message refreshes a personal chat's reference
        if first == "help" and len(words) == 1:
            return await self._say(incoming, f"{HELP_LINES}\n{HELP_TEXT}")
        if first == AWAY:  # the delegate by name or email: Teams' @mentions are dropped above
            return await self._say(
                incoming, await answer_away(self.engine, who, words[1:], self._named)
            )
        if first == "subscribe":
            if not who.is_admin:
                return await self._say(
                    incoming, "Only an admin can subscribe a conversation; nothing changed."
                )
            if len(words) != 2 or not CONVERSATION_NAME.match(words[1]):
                return await self._say(incoming, _SUBSCRIBE_USAGE)
            if words[1] == EACH_APPROVER:
                return await self._say(incoming, _NOT_DM)
            return await self._subscribe(incoming, words[1], person.name)
        result = await run_command(self.engine.gate, text, who)
        return await self._say(incoming, result.text)

    async def _named(self, written: str) -> str | None:
        return by_name_or_email(self.engine, written)

    async def _subscribe(self, incoming: Incoming, name: str, by: str) -> TurnReply:
        now = self.engine.clock.now()
        await self._remember(incoming)  # a conversation the install event never reached
        await self.engine.chat.name_conversation(PLATFORM, incoming.conversation_id, name, now)
        log.info("teams: %s named conversation %s teams:%s", by, incoming.conversation_id, name)
        return await self._say(
            incoming,
            f"This conversation is now teams:{name}. Approval nodes with "
            f"channels: [teams:{name}] post their cards here.",
        )

    async def _say(self, incoming: Incoming, text: str, *, key: str | None = None) -> TurnReply:
        """Queue ``text`` as a reply in the conversation (and thread) ``incoming`` came from;
        ``key``: its dedupe key, when saying it twice must not happen (a greeting)."""
        message = OutboxMessage(
            channel=reply_channel(incoming.conversation_id),
            kind=REPLY,
            dedupe_key=key or f"{PLATFORM}:{REPLY}:{self.engine.ids.new_id()}",
            payload={"reference": incoming.reference, "thread": incoming.thread, "text": text},
        )
        await self.engine.chat.queue_messages([message], self.engine.clock.now())
        self.engine.wake_outbox()
        return TurnReply()

    # -- card actions --------------------------------------------------------------------------

    async def _card_action(self, incoming: Incoming) -> InvokeReply:
        action = incoming.value.get("action") if isinstance(incoming.value, dict) else None
        if not isinstance(action, dict):
            return _error(400, "BadRequest", "no action in the invoke")
        verb = str(action.get("verb") or "")
        raw = action.get("data")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        request_id = data.get("requestId")
        if verb == "feedback":
            return await self._feedback(incoming, data)
        if not isinstance(request_id, str) or not request_id:
            return _error(400, "BadRequest", "the action names no request")
        if verb != "refresh" and verb not in VERBS:
            return _error(400, "BadRequest", f"unknown verb {verb!r}")
        person = self._person(incoming)
        if verb == "refresh":  # the one moment a Teams card knows who reads it
            return await self._current(request_id, viewer=person)
        if person is None:
            return await self._current(
                request_id,
                "You are not in Signoff's people list, so you cannot decide; nothing changed.",
            )
        who = self.engine.principal_for_person(person.name)
        notes = _reason(data) if verb == "deny" else None
        try:
            after = await decide(self.engine.approvals, request_id, who, verb, notes)
        except SignoffError as exc:
            kind = refusal(exc)
            if kind is Refusal.MISSING:
                return _message(NO_REQUEST)
            if kind is Refusal.DECIDED:
                assert isinstance(exc, AlreadyDecided)
                by = f" by {exc.decided_by}" if exc.decided_by else ""
                return await self._current(request_id, f"Already decided{by}; {NOTHING_CHANGED}.")
            if kind is Refusal.VOTED:
                return await self._current(request_id, "You have already approved this request.")
            if kind in (Refusal.REFUSED, Refusal.NOT_TAKEN_OVER):
                return await self._current(request_id, f"{exc.message}; {NOTHING_CHANGED}.")
            raise
        return _card(await approval_card(self.engine, after))

    async def _feedback(self, incoming: Incoming, data: dict[str, Any]) -> InvokeReply:
        """👍/👎 under a step result: feedback that calibrates the confidence gate."""
        person = self._person(incoming)
        if person is None:
            return _message("You are not in Signoff's people list; feedback not recorded.")
        score = data.get("score")
        try:
            await self.engine.gate.record_feedback(
                str(data.get("runId")),
                str(data.get("stepId")),
                score if isinstance(score, int) else 0,
                None,
                self.engine.principal_for_person(person.name),
            )
        except (InvalidRequest, NotFound) as exc:
            return _message(f"Feedback not recorded: {exc.message}")
        return _message("Thanks, your feedback is recorded.")

    async def _current(
        self, request_id: str, banner: str | None = None, *, viewer: Person | None = None
    ) -> InvokeReply:
        """The request's card as it is now, for the clicker (with ``banner`` on top); for a
        ``viewer`` who would decide it as an override (an admin outside its approvers), the
        banner says so before they click."""
        try:
            request: TakeoverRequest = await self.engine.queries.get_takeover(request_id)
        except NotFound:
            return _message(NO_REQUEST)
        if banner is None and viewer is not None:
            who = self.engine.principal_for_person(viewer.name)
            banner = override_warning(request, override_of(self.engine.config, request, who))
        card = await approval_card(self.engine, request)
        return _card(with_banner(card, banner) if banner else card)

    def _person(self, incoming: Incoming) -> Person | None:
        if not incoming.sender_aad:
            return None
        return self.engine.config.person_by("teams", incoming.sender_aad)


def command_text(text: str) -> str:
    """A message's words. Teams sends channel messages as HTML (``<p>``, ``&nbsp;``) and
    writes @mentions as ``<at>name</at>``; the adapter removes the bot's own mention when the
    activity lists it, and any left (a client that did not list it) are dropped here."""
    return " ".join(html.unescape(_TAGS.sub(" ", _MENTIONS.sub(" ", text))).split())


def _reason(data: dict[str, Any]) -> str | None:
    reason = data.get("reason")
    return reason.strip() or None if isinstance(reason, str) else None


def _card(card: dict[str, Any]) -> InvokeReply:
    return InvokeReply(200, {"statusCode": 200, "type": ADAPTIVE_CARD, "value": card})


def _message(text: str) -> InvokeReply:
    return InvokeReply(
        200,
        {"statusCode": 200, "type": "application/vnd.microsoft.activity.message", "value": text},
    )


def _error(status: int, code: str, message: str) -> InvokeReply:
    body = {
        "statusCode": status,
        "type": "application/vnd.microsoft.error",
        "value": {"code": code, "message": message},
    }
    return InvokeReply(200, body)


__all__ = ["Outgoing", "TeamsHandlers", "command_text"]
