"""The three jinja2 environments, one per output format, and their escaping filters.

How escaping cannot be forgotten:

* **JSON outputs (Slack, Teams).** Templates write the JSON structure; every ``{{ ... }}``
  sits inside a JSON string literal. The environment's ``finalize`` accepts only values that a
  filter of *that* environment marked as escaped (``SlackText`` / ``TeamsText``) and writes
  them JSON-string-escaped; a bare ``{{ value }}`` raises ``UnescapedValue`` when rendered. So
  every interpolation names its escaping (``|mrkdwn``, ``|plain``, ``|run``, ``|exact`` ...),
  and each of those applies ``visible`` first. Rendered output is parsed with ``json.loads``,
  so a template slip is an error, never a malformed card.
* **HTML.** ``autoescape=True``, and ``finalize`` passes every non-``Markup`` value through
  ``visible`` before jinja2 escapes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import jinja2
from markupsafe import Markup

from cards.notices import Mention, mention_id, mention_name
from cards.text import (
    Flavor,
    escape_mrkdwn,
    slack_code_edges,
    truncate,
    visible,
)
from cards.view import safe_url

_LOADER = jinja2.PackageLoader("cards", "templates")


class UnescapedValue(jinja2.TemplateError):
    """A JSON template interpolated a value without an escaping filter."""


class SlackText(str):
    """Text already escaped for a Slack JSON string (mrkdwn or plain_text, as filtered)."""

    __slots__ = ()


class TeamsText(str):
    """Text already made safe for an Adaptive Card string."""

    __slots__ = ()


def _finalizer(kind: type[str]) -> Callable[[object], str]:
    def finalize(value: object) -> str:
        if not isinstance(value, kind):
            raise UnescapedValue(
                f"interpolated {type(value).__name__} {str(value)[:40]!r} without a "
                f"{kind.__name__} filter"
            )
        return json.dumps(str(value), ensure_ascii=False)[1:-1]

    return finalize


def _json_env(kind: type[str], filters: dict[str, Callable[..., Any]]) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=_LOADER,
        autoescape=False,  # JSON: escaping is the finalize + filters contract above
        finalize=_finalizer(kind),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters.update(filters)
    return env


def _unix(moment: datetime) -> int:
    return int(moment.astimezone(UTC).timestamp())


def plain_date(moment: datetime) -> str:
    """The fallback spelling of a time when a client cannot localise it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


# --- Slack ---------------------------------------------------------------------------------


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
    return SlackText(slack_code_edges(truncate(str(value), limit, Flavor.SLACK_CODE)))


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


SLACK = _json_env(
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

# --- Teams ---------------------------------------------------------------------------------


def _run(value: object, limit: int = 4000) -> TeamsText:
    """For TextRun text, which has no markdown; {{DATE(...)}} look-alikes are broken up."""
    if value is None:
        return TeamsText("")
    return TeamsText(truncate(str(value), limit, Flavor.TEAMS))


def _teams_exact(value: object) -> TeamsText:
    return TeamsText(str(value))


def _teams_date(moment: datetime) -> TeamsText:
    # https://learn.microsoft.com/adaptive-cards/authoring-cards/text-features (DATE/TIME)
    stamp = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return TeamsText(f"{{{{DATE({stamp}, SHORT)}}}} {{{{TIME({stamp})}}}}")


def _teams_url(url: str | None) -> TeamsText:
    checked = safe_url(url)
    if checked is None:
        raise ValueError("a link needs a URL that passed safe_url")
    return TeamsText(checked)


def _teams_escaped(value: str) -> TeamsText:
    return TeamsText(value)


TEAMS = _json_env(
    TeamsText,
    {
        "run": _run,
        "exact": _teams_exact,
        "date": _teams_date,
        "url": _teams_url,
        "escaped": _teams_escaped,
        "mention_name": mention_name,
    },
)

# --- Web -----------------------------------------------------------------------------------


def _web_finalize(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return visible(str(value))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clip(value: object, limit: int = 4000) -> str:
    if value is None:
        return ""
    return truncate(str(value), limit, Flavor.PLAIN)


WEB = jinja2.Environment(
    loader=_LOADER,
    autoescape=True,
    finalize=_web_finalize,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
WEB.filters.update(
    {
        "iso": _iso,
        "plain_date": plain_date,
        "clip": _clip,
        "mention_name": mention_name,
    }
)


def render_json(env: jinja2.Environment, name: str, **context: Any) -> Any:
    """Render a JSON template and parse it: a malformed result raises, it is never sent."""
    return json.loads(env.get_template(name).render(**context))
