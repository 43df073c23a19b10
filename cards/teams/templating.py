"""The Adaptive Card jinja2 environment: the ``TeamsText`` escaping filters."""

from __future__ import annotations

from datetime import UTC, datetime

from cards.notices import mention_name
from cards.templating import json_env
from cards.text import Flavor, truncate
from cards.view import safe_url


class TeamsText(str):
    """Text already made safe for an Adaptive Card string."""

    __slots__ = ()


def _run(value: object, limit: int = 4000) -> TeamsText:
    """For TextRun text, which has no markdown; {{DATE(...)}} look-alikes are broken up."""
    if value is None:
        return TeamsText("")
    return TeamsText(truncate(str(value), limit, Flavor.CARD_TEXT))


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


TEAMS = json_env(
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
