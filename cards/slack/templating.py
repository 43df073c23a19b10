"""Block Kit's jinja2 environment: the ``SlackText`` escaping filters (see ``cards.templating``)."""

from __future__ import annotations

from datetime import UTC, datetime

from cards.notices import Mention, mention_id
from cards.templating import json_env, plain_date
from cards.text import Flavor, escape_mrkdwn, truncate
from cards.view import safe_url


class SlackText(str):
    """Text already escaped for a Slack JSON string (mrkdwn or plain_text, as filtered)."""

    __slots__ = ()


def _unix(moment: datetime) -> int:
    return int(moment.astimezone(UTC).timestamp())


def slack_code_edges(chunk: str) -> str:
    """A backtick at the edge of a Slack code block would merge with the ``` fence: escape it.
    Callers leave 10 characters of room for this."""
    if chunk.startswith("`"):
        chunk = "\\u0060" + chunk[1:]
    if chunk.endswith("`"):
        chunk = chunk[:-1] + "\\u0060"
    return chunk


def _mrkdwn(value: object, limit: int = 3000) -> SlackText:
    if value is None:
        return SlackText("")
    return SlackText(truncate(str(value), limit, Flavor.MRKDWN))


def _plain(value: object, limit: int = 3000) -> SlackText:
    """For plain_text objects: visible, no entities (Slack shows plain_text as written)."""
    if value is None:
        return SlackText("")
    return SlackText(truncate(str(value), limit, Flavor.PLAIN))


def _code(value: object, limit: int = 2900) -> SlackText:
    """The inside of a ``` code block (the template writes the fences)."""
    if value is None:
        return SlackText("")
    return SlackText(slack_code_edges(truncate(str(value), limit, Flavor.MRKDWN_CODE)))


def _slack_exact(value: object) -> SlackText:
    """Ids and button values: passed unchanged, so the click carries exactly what we sent."""
    return SlackText(str(value))


def _slack_date(moment: datetime) -> SlackText:
    # https://docs.slack.dev/messaging/formatting-message-text#date-formatting
    return SlackText(
        f"<!date^{_unix(moment)}^{{date_short_pretty}} at {{time}}|{plain_date(moment)}>"
    )


def _slack_link(url: str | None, label: object) -> SlackText:
    """``<url|label>`` for a URL that passed ``safe_url``; only the label when there is none."""
    text = truncate(str(label), 200, Flavor.MRKDWN)
    checked = safe_url(url)
    if checked is None:
        return SlackText(text)
    return SlackText(f"<{escape_mrkdwn(checked)}|{text}>")


def _slack_id(value: str, prefixes: str) -> bool:
    return (
        value[:1] in prefixes
        and value.isascii()
        and value[1:].isalnum()
        and value.isupper()
        and len(value) < 40
    )


def _slack_mention(mention: Mention) -> SlackText:
    """A real mention only for a well-formed user or user-group id; anything else is text."""
    value = mention_id(mention)
    if _slack_id(value, "UW"):
        return SlackText(f"<@{value}>")
    if _slack_id(value, "S"):
        return SlackText(f"<!subteam^{value}>")
    return SlackText(truncate(value, 100, Flavor.MRKDWN))


def _slack_escaped(value: str) -> SlackText:
    """Text a renderer already escaped for mrkdwn (argument excerpts)."""
    return SlackText(value)


SLACK = json_env(
    SlackText,
    {
        "mrkdwn": _mrkdwn,
        "plain": _plain,
        "code": _code,
        "exact": _slack_exact,
        "date": _slack_date,
        "link": _slack_link,
        "mention": _slack_mention,
        "escaped": _slack_escaped,
    },
)
