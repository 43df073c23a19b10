"""Who a Slack user is in Signoff, and a person's Slack user id: ``people:`` first, then email.

Both ways go through here (the one seam for "Slack id of a person" and "person of a Slack
user"):

* person -> Slack id, to notify them or publish their Home tab: their ``slack:`` id; for a
  person with only ``email:``, ``users.lookupByEmail``;
* Slack user -> person, for a click: the person whose ``slack:`` id it is; else the email of
  the clicker (``users.info``, which shows it with the ``users:read.email`` scope) matched
  against the ``email:`` of the people who have no ``slack:`` id. A person given a ``slack:``
  id is never matched by email: the id written in ``app.yaml`` is the one that decides for them.

Trust: the clicker's Slack id is the one of the request whose signature bolt checked, and an
email counts only when Slack says the member confirmed it (``is_email_confirmed``) and the
member is neither deleted nor a bot.

Cache: both lookups are kept in this process for ``KEEP`` (on the engine's clock), not-found
answers for ``KEEP_MISSING``; the ``user_change`` event (a member changed their profile, their
email among it) forgets what was kept about that member at once. Another replica, which did not
receive the event, follows within ``KEEP``. A lookup Slack did not answer (unreachable, rate
limited, or slower than ``LOOKUP_SECONDS``: a click waits for it before its acknowledgement) is
not kept: the caller gets ``LookupUnavailable`` and changes nothing.

``DirectMessages`` opens (``conversations.open``) the bot's direct message with a user and
remembers its channel id for the life of the process: Slack answers the same IM channel every
time, so a second open is only a cost (Tier 3).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError

from bot.slack.api import SlackApi, error_code
from bot.slack.installs import Workspaces, split_target
from engine.assembly import Engine
from engine.config import Person

FIELD = "slack"  # the people: field holding a Slack user id
KEEP = timedelta(hours=1)
KEEP_MISSING = timedelta(minutes=5)
MAX_KEPT = 10_000  # members kept by id (any member may click): the oldest go first
# A click is acknowledged after its decision: a lookup on its way must leave time for that
# within Slack's 3 s.
LOOKUP_SECONDS = 2.0


class LookupUnavailable(Exception):
    """Slack did not answer a lookup (unreachable, rate limited, refused): ask again later."""


class SlackPeople:
    """``people:`` and Slack's directory, each way (module docstring)."""

    def __init__(self, engine: Engine, api: SlackApi) -> None:
        self.engine = engine
        self.api = api
        self.workspaces = api.workspaces or Workspaces(lambda: engine.config)
        self._ids: dict[str, tuple[str | None, datetime]] = {}  # email -> (user id, until)
        self._emails: dict[str, tuple[str | None, datetime]] = {}  # user id -> (email, until)

    # -- person -> Slack id --------------------------------------------------------------------

    async def slack_id(self, person: str) -> str | None:
        """``person``'s Slack user id: their ``slack:`` id, else the member with their
        ``email:``; None when they have neither (or nobody on Slack has that address).
        Raises ``LookupUnavailable`` when Slack did not answer."""
        found = self.engine.config.people.get(person)
        if found is None:
            return None
        if found.ids.get(FIELD):
            return found.ids[FIELD]
        if not found.email:
            return None
        email = found.email.lower()
        kept = self._kept(self._ids, email)
        if kept is not None:
            return kept[0]
        user = await self._ask(self.api.user_by_email(found.email))
        user_id = str(user["id"]) if user is not None and _trusted_email(user) else None
        self._keep(self._ids, email, user_id)
        if user_id is not None:
            self._keep(self._emails, user_id, email)
        return user_id

    def known_id(self, person: str) -> str | None:
        """``slack_id`` without asking Slack: the ``slack:`` id, or the one kept for the
        person's email (for mentions, rendered where no call can wait)."""
        found = self.engine.config.people.get(person)
        if found is None:
            return None
        if found.ids.get(FIELD):
            return found.ids[FIELD]
        kept = self._kept(self._ids, found.email.lower()) if found.email else None
        return kept[0] if kept is not None else None

    def mention_id(self, person: str, team: str | None = None) -> str | None:
        """The user id that @-mentions ``person`` in a message of workspace ``team`` (None:
        the default one): their ``known_id``, unless it is of another workspace, where the same
        user id would mention somebody else. None: name them as text."""
        person_id = self.known_id(person)
        if not person_id:
            return None
        their_team, user_id = split_target(person_id)
        return None if their_team and team and their_team != team else user_id

    # -- Slack id -> person --------------------------------------------------------------------

    async def person_for(self, user_id: str, team: str | None = None) -> Person | None:
        """The person Slack member ``user_id`` of workspace ``team`` is in ``people:`` (module
        docstring); None: nobody. Raises ``LookupUnavailable`` when Slack did not answer."""
        if team is None:  # a member as Signoff names them (``SlackApi.member``): T0123/U0456
            team, user_id = split_target(user_id)
        if not user_id:
            return None
        config = self.engine.config
        named = await self.workspaces.person(team, user_id)
        if named is not None:
            return named
        if not await self.workspaces.is_default(team):
            return None  # emails are looked up in the default workspace only
        unnamed = [p for p in config.people.values() if p.email and not p.ids.get(FIELD)]
        if not unnamed:
            return None  # no call to Slack when nobody could be found by email
        kept = self._kept(self._emails, user_id)
        if kept is not None:
            email = kept[0]
        else:
            user = await self._ask(self.api.user_info(user_id))
            email = _email(user) if user is not None and _trusted_email(user) else None
            self._keep(self._emails, user_id, email)
            if email is not None:
                self._keep(self._ids, email, user_id)
        if email is None:
            return None
        return next((p for p in unnamed if (p.email or "").lower() == email), None)

    # -- the user_change event -----------------------------------------------------------------

    def forget(self, user: Mapping[str, Any]) -> None:
        """A member's profile changed: forget their id and whatever email led to them."""
        user_id = str(user.get("id") or "")
        if not user_id:
            return
        self._emails.pop(user_id, None)
        for email, (kept, _) in list(self._ids.items()):
            if kept == user_id:
                del self._ids[email]
        new = _email(user)
        if new is not None:
            self._ids.pop(new, None)  # a "nobody has it" kept for the new address

    # -- helpers -------------------------------------------------------------------------------

    async def _ask(self, call: Any) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(LOOKUP_SECONDS):
                found: dict[str, Any] | None = await call
        except SlackApiError as exc:
            raise LookupUnavailable(error_code(exc)) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise LookupUnavailable(type(exc).__name__) from exc
        return found

    def _kept(
        self, table: dict[str, tuple[str | None, datetime]], key: str
    ) -> tuple[str | None] | None:
        entry = table.get(key)
        if entry is None:
            return None
        if self.engine.clock.now() >= entry[1]:
            del table[key]
            return None
        return (entry[0],)

    def _keep(
        self, table: dict[str, tuple[str | None, datetime]], key: str, value: str | None
    ) -> None:
        keep = KEEP if value is not None else KEEP_MISSING
        table.pop(key, None)
        table[key] = (value, self.engine.clock.now() + keep)
        while len(table) > MAX_KEPT:
            del table[next(iter(table))]


def _email(user: Mapping[str, Any]) -> str | None:
    profile = user.get("profile")
    email = profile.get("email") if isinstance(profile, Mapping) else None
    return email.lower() if isinstance(email, str) and email else None


def _trusted_email(user: Mapping[str, Any]) -> bool:
    """Whether the member's email may say who they are (module docstring)."""
    return (
        _email(user) is not None
        and user.get("is_email_confirmed") is True
        and not user.get("deleted")
        and not user.get("is_bot")
    )


class DirectMessages:
    """The bot's IM channel with each Slack user it has written to (``conversations.open``)."""

    def __init__(self, api: SlackApi) -> None:
        self.api = api
        self._channels: dict[tuple[str | None, str], str] = {}  # (team, user) -> IM channel id

    async def channel(self, user_id: str, team: str | None = None) -> str:
        """The IM channel of ``user_id`` of workspace ``team`` (None: the default one)."""
        found = self._channels.get((team, user_id))
        if found is None:
            found = await self.api.open_dm(user_id, team=team)
            self._channels[(team, user_id)] = found
        return found
