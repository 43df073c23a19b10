"""Finding a person on Slack, to reach them: the one seam for it.

``slack_id_for`` is how a card addressed to a person (``slack:@alice``, or each approver through
``slack:dm``) finds its Slack user, and how the person who decided is found to be told that
their card could not be updated (``bot.slack.refused``). It reads the person's ``people:``
``slack`` id; a lookup by email (``users.lookupByEmail``) extends it here, so that whatever
must reach a person keeps asking this one function. (Mentions in rendered text still show a
person by their ``people:`` id, or by name.)

``DirectMessages`` opens (``conversations.open``) the bot's direct message with a user and
remembers its channel id for the life of the process: Slack answers the same IM channel every
time, so a second open is only a cost (Tier 3).
"""

from __future__ import annotations

from bot.slack.api import SlackApi
from engine.config import AppConfig


async def slack_id_for(config: AppConfig, api: SlackApi, person: str) -> str | None:
    """``person``'s Slack user id, or None when Signoff knows none (``people:`` ``slack``).
    ``api`` is for lookups that ask Slack (by email); the ``people:`` id needs none."""
    found = config.people.get(person)
    if found is None:
        return None
    return found.ids.get("slack") or None


class DirectMessages:
    """The bot's IM channel with each Slack user it has written to (``conversations.open``)."""

    def __init__(self, api: SlackApi) -> None:
        self.api = api
        self._channels: dict[str, str] = {}  # Slack user id -> IM channel id

    async def channel(self, user_id: str) -> str:
        found = self._channels.get(user_id)
        if found is None:
            found = await self.api.open_dm(user_id)
            self._channels[user_id] = found
        return found
