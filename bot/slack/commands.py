"""The ``/signoff`` slash command, and the answer to an @mention.

    /signoff help                 what the bot does and the commands
    /signoff pending              (ephemeral) the requests you may decide, linked to their cards
    /signoff away ...             away until a date with a delegate, back, or whether you are
                                  (``bot.away``: the words shared with Teams)
    /signoff gate ...             the confidence gate (``engine.gate.commands``: the one parser
                                  and executor shared with Teams; changes need an admin)

A gate change is stored and audited by the engine before the acknowledgement, which carries
the confirmation ``in_channel``; status, help, usage lines and refusals stay ephemeral.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.api.views import approval_url
from bot.away import VERB, answer_away, by_name_or_email
from bot.slack.api import SlackApi
from bot.slack.background import Background
from bot.slack.people import LookupUnavailable, SlackPeople
from cards.templating import plain_date
from cards.text import Flavor, agent_text, escape_mrkdwn, truncate
from engine.assembly import Engine
from engine.domain.errors import SignoffError
from engine.domain.model import Principal, TakeoverRequest
from engine.gate.commands import HELP_TEXT as GATE_HELP
from engine.gate.commands import Outcome, run_command

log = logging.getLogger(__name__)

COMMAND = "/signoff"
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")  # how Slack writes @bob in a command
PENDING_SHOWN = 20
MAX_COUNTED = 1000  # requests read for one answer: beyond, "1000+" (the console lists them all)
HELP = (
    "*Signoff* puts a person in the loop of AI agents: approval cards land in threads here, "
    "and their buttons approve, deny, take over or release the waiting step.\n"
    "`/signoff pending` — the requests you can decide, with links to their cards\n"
    "`/signoff away until 2026-12-24 delegate @bob` — bob decides for you until then; "
    "`/signoff away off` when you're back; `/signoff away` to see it\n"
    "`/signoff help` — this help\n"
    "Admins tune the confidence gate with `/signoff gate ...`:\n```"
    + escape_mrkdwn(GATE_HELP)
    + "```"
)
NOT_LINKED = (
    "Your Slack account is not linked to anyone in Signoff's people list, so Signoff cannot "
    "act for you. Ask a Signoff admin to add your Slack user id or your email address under "
    "people: in app.yaml."
)


class Commands:
    def __init__(
        self, engine: Engine, api: SlackApi, background: Background, people: SlackPeople
    ) -> None:
        self.engine = engine
        self.api = api
        self.background = background
        self.people = people

    def register(self, app: AsyncApp) -> None:
        app.command(COMMAND)(self.signoff)
        app.event("app_mention")(self.mentioned)

    async def signoff(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        text = str(command.get("text") or "").strip()
        verb = text.split()[0].lower() if text else "help"
        if verb == "help":
            await _answer(ack, HELP)
            return
        team = str(command.get("team_id") or "") or None
        try:
            person = await self.people.person_for(str(command.get("user_id", "")), team)
        except LookupUnavailable:
            await _answer(ack, "Signoff couldn't ask Slack who you are just now. Try again.")
            return
        if person is None:
            await _answer(ack, NOT_LINKED)
            return
        who = self.engine.principal_for_person(person.name)
        if verb == "pending":
            await self._pending(ack, who, command.get("response_url"))
        elif verb == "gate":
            await self._gate(ack, who, text)
        elif verb == VERB:
            await self._away(ack, who, text.split()[1:], team)
        else:
            shown = truncate(text.split()[0], 50, Flavor.MRKDWN)
            usage = "Usage: `/signoff help | pending | away ... | gate ...`"
            await _answer(ack, f"Unknown command `{shown}`. {usage}")

    async def _gate(self, ack: AsyncAck, who: Principal, text: str) -> None:
        try:
            result = await run_command(self.engine.gate, text, who)
        except SignoffError as exc:
            log.warning("/signoff %s failed: %s", text, exc)
            await _answer(ack, "Signoff could not do that just now, so nothing changed. Try again.")
            return
        shown = escape_mrkdwn(result.text)
        await _answer(ack, shown, in_channel=result.outcome == Outcome.CHANGED)

    async def _away(self, ack: AsyncAck, who: Principal, args: list[str], team: str | None) -> None:
        """``/signoff away ...`` as ``who``; ``@bob`` arrives as ``<@U0BOB|bob>``, a person by
        their Slack id (or their confirmed email), else a name or email of ``people:``."""

        async def resolve(written: str) -> str | None:
            mention = _MENTION.fullmatch(written)
            if mention is None:
                return by_name_or_email(self.engine, written)
            found = await self.people.person_for(mention.group(1), team)
            return None if found is None else found.name

        try:
            text = await answer_away(self.engine, who, args, resolve)
        except LookupUnavailable:
            text = "Signoff couldn't ask Slack who that is just now, so nothing changed. Try again."
        except SignoffError as exc:
            log.warning("/signoff away failed: %s", exc)
            text = "Signoff could not do that just now, so nothing changed. Try again."
        await _answer(ack, escape_mrkdwn(text))

    async def _pending(self, ack: AsyncAck, who: Principal, response_url: object) -> None:
        """The open requests ``who`` may decide (read before the ack); the answer with links to
        their cards follows through ``response_url`` (permalinks are Web API calls)."""
        try:
            inbox = await self.engine.approvals.inbox(who, limit=MAX_COUNTED)
        except SignoffError:
            await _answer(ack, "Signoff could not read the pending requests just now. Try again.")
            return
        mine = [e.request for e in inbox.entries]
        counted = f"{len(mine)}{'+' if inbox.more else ''}"
        if not mine:
            await _answer(ack, "Nothing is waiting for your decision.")
            return
        if not isinstance(response_url, str) or not response_url:
            await _answer(ack, await self._pending_text(mine, counted, who.name))
            return
        count = f"{counted} request is" if counted == "1" else f"{counted} requests are"
        await _answer(ack, f"{count} waiting for you; links follow.")
        pending = self._answer_pending(response_url, mine, counted, who.name)
        self.background.spawn(pending, "pending")

    async def _answer_pending(
        self, response_url: str, mine: list[TakeoverRequest], counted: str, person: str
    ) -> None:
        await self.api.respond(response_url, await self._pending_text(mine, counted, person))

    async def _pending_text(self, mine: list[TakeoverRequest], counted: str, person: str) -> str:
        shown = sorted(mine, key=lambda r: r.expires_at)[:PENDING_SHOWN]
        links = await asyncio.gather(*(self._link(r, person) for r in shown))
        lines = [f"*Waiting for your decision ({counted}):*"]
        for request, link in zip(shown, links, strict=True):
            # Agent text on one line (as the card shows it): it cannot draw a status line here.
            title = truncate(agent_text(request.reason or request.id), 150, Flavor.MRKDWN)
            expires = (
                f"<!date^{int(request.expires_at.timestamp())}^{{date_short_pretty}} at {{time}}"
                f"|{plain_date(request.expires_at)}>"
            )
            lines.append(f"• <{escape_mrkdwn(link)}|{title}> — expires {expires}")
        if len(mine) > len(shown):
            lines.append(f"… and {len(mine) - len(shown)} more.")
        return "\n".join(lines)

    async def _link(self, request: TakeoverRequest, person: str) -> str:
        """The request's Slack card ``person`` can open (their own direct-message copy first,
        then a channel's; never someone else's DM), else its approval page."""
        try:
            cards = await self.engine.chat.messages(request_id=request.id, kind="card")
        except SignoffError:
            cards = []
        own = f"slack:@{person}"
        shown = [c for c in cards if c.channel == own] + [
            c for c in cards if c.platform == "slack" and not c.channel.startswith("slack:@")
        ]
        for card in shown:
            # A direct message's channel id is not in its address (slack:@bob).
            target = str(card.data.get("channelId") or card.channel.partition(":")[2])
            link = await self.api.permalink(target, card.message_ref)
            if link:
                return link
        return approval_url(self.engine.config.server.public_url, request.id)

    async def mentioned(self, event: dict[str, Any]) -> None:
        """An @mention gets a pointer to the help, in its thread (events are acked by bolt).
        Slack's retries of the event (same ``event_id``) never get here: ``ActOnce`` answers
        them, on any replica (``bot/slack/once.py``), from the database: Signoff never reads
        the thread to see whether it answered already."""
        channel, ts = event.get("channel"), event.get("thread_ts") or event.get("ts")
        if not isinstance(channel, str) or not isinstance(ts, str):
            return
        text = "Hi! Type `/signoff help` to see what I do, or `/signoff pending` for your queue."
        self.background.spawn(self._reply(channel, ts, text), "mention")

    async def _reply(self, channel: str, ts: str, text: str) -> None:
        key = f"mention:{channel}:{ts}"
        await self.api.post(channel, {"text": text}, thread_ts=ts, dedupe_key=key)


async def _answer(ack: AsyncAck, text: str, *, in_channel: bool = False) -> None:
    """The acknowledgement carries the answer: ephemeral (only the caller sees it) unless
    ``in_channel``."""
    await ack(text=text, response_type="in_channel" if in_channel else "ephemeral")
