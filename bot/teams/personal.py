"""A person's 1:1 chat with the bot: where cards addressed to them go, and where they ask what
waits for them.

    installed (bot added in a personal chat)  the chat is stored as the person's own
                                              (``chat_personal``, by AAD object id), and one
                                              line says what they can do here
    "pending"                                 the requests they may decide now, as the same
                                              Adaptive Cards as in channels (oldest first)

The person is the one ``people:`` maps the activity's ``from.aadObjectId`` to; the conversation
is the personal one the activity came in, never one the text names. What waits for them is the
engine's inbox (``Approvals.inbox``, by the rule every channel's inbox keeps): a request they
started, or were asked only through a group they have left, is not listed. Listed cards act
like any other: a click is the same ``adaptiveCard/action`` invoke, decided as the clicker.

Everything here is posted through the outbox, on the conversation's reply channel, so that the
listing's cards follow its first line in order, within Teams' rate limits. Each listed card is
remembered like a posted card, so a decision updates it too (``bot.teams.sink``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.teams.activities import Incoming
from engine.assembly import Engine
from engine.config.sections import Person
from engine.domain.model import OutboxMessage, TakeoverRequest
from engine.services.approval_queue import MAX_PAGE

PLATFORM = "teams"
LISTED = "listed_card"  # the outbox kind of a card shown by "pending"
MAX_LISTED = 10  # cards one "pending" shows: 10 posts take Teams' pacing about 2 s
GREETING = (
    "Hi! I'll bring the approval requests you are asked to decide here. Write pending to see "
    "what is waiting for you now, or help for everything I understand."
)
UNKNOWN = (
    "Hi! I don't know you yet: once an admin adds your Azure AD object id ({aad}) to people: "
    "in Signoff's app.yaml, I'll bring the approval requests you can decide here."
)
NOT_HERE = (
    "pending lists your approvals in your personal chat with me, not here (what they ask is "
    "for their approvers' eyes): open a chat with the bot and write pending there."
)
HELP_LINES = (
    "In your personal chat with me:\n"
    "  pending — the approval requests waiting for your decision, as cards you can click\n"
    "Anywhere:\n"
    "  away until 2026-12-24 delegate bob — bob (name or email) decides for you until then;\n"
    "  away off — you're back; away — whether you're away\n"
    "In a channel or group chat (admins):\n"
    "  subscribe <name> — cards of approvals with channels: [teams:<name>] come here\n"
)

Say = Callable[..., Awaitable[object]]  # ``TeamsHandlers._say(incoming, text, key=...)``


class PersonalChat:
    """The personal-chat half of ``bot.teams.handlers``."""

    def __init__(self, engine: Engine, say: Say) -> None:
        self.engine = engine
        self.say = say

    async def remember(self, incoming: Incoming) -> bool:
        """Store ``incoming``'s conversation as its sender's personal chat, when it is one;
        whether it was. Any message in it refreshes the reference (an install Signoff missed,
        a reinstall in a new conversation)."""
        if not incoming.personal or not incoming.sender_aad:
            return False
        await self.engine.chat.remember_personal_chat(
            PLATFORM,
            incoming.sender_aad,
            incoming.conversation_id,
            incoming.reference,
            self.engine.clock.now(),
        )
        return True

    async def installed(self, incoming: Incoming, person: Person | None) -> None:
        """The bot was added to a personal chat: remember it, and greet once per install.
        Teams sends conversationUpdate and installationUpdate together: only the former greets,
        and a retried one, keeping its activity id, greets no second time."""
        if not await self.remember(incoming) or incoming.type != "conversationUpdate":
            return
        if person is None:
            text = UNKNOWN.format(aad=incoming.sender_aad)
        else:
            waiting, more = await self.decidable(person)
            text = GREETING
            if waiting:  # cards that could not reach them before: nothing was lost
                text += f" {_waiting(len(waiting), more)} for you now."
        key = f"{PLATFORM}:greeting:{incoming.conversation_id}:{incoming.activity_id}"
        await self.say(incoming, text, key=key[:300])

    async def pending(self, incoming: Incoming, person: Person) -> None:
        """List what ``person`` may decide now, in the personal chat ``incoming`` came from."""
        if not incoming.personal:
            await self.say(incoming, NOT_HERE)
            return
        await self.remember(incoming)
        mine, more = await self.decidable(person)
        if not mine:
            await self.say(incoming, "Nothing waits for your decision.")
            return
        shown = mine[:MAX_LISTED]
        head = f"{_waiting(len(mine), more)} for your decision"
        if len(shown) < len(mine):
            head += f"; the {len(shown)} oldest (decide them, then write pending again)"
        head += ":"
        await self.say(incoming, head)
        listing = self.engine.ids.new_id()
        channel = reply_channel(incoming.conversation_id)
        messages = [
            OutboxMessage(
                channel=channel,
                kind=LISTED,
                dedupe_key=f"{PLATFORM}:{LISTED}:{listing}:{request.id}",
                payload={"requestId": request.id, "reference": incoming.reference},
                run_id=request.run_id,
                request_id=request.id,
            )
            for request in shown
        ]
        await self.engine.chat.queue_messages(messages, self.engine.clock.now())
        self.engine.wake_outbox()

    async def decidable(self, person: Person) -> tuple[list[TakeoverRequest], bool]:
        """The pending requests ``person`` may decide now, oldest first (at most ``MAX_PAGE``),
        and whether more wait."""
        who = self.engine.principal_for_person(person.name)
        inbox = await self.engine.approvals.inbox(who, limit=MAX_PAGE)
        return [e.request for e in inbox.entries], inbox.more


def _waiting(count: int, more: bool) -> str:
    """ "1 approval request waits", "3 approval requests wait", "200+ approval requests wait"."""
    if count == 1 and not more:
        return "1 approval request waits"
    return f"{count}{'+' if more else ''} approval requests wait"


def reply_channel(conversation_id: str) -> str:
    """The outbox channel of what is posted into one conversation as an answer
    (``bot.teams.handlers``: ``teams:reply/<conversation id>``, at most 300 characters)."""
    return f"{PLATFORM}:reply/{conversation_id}"[:300]
