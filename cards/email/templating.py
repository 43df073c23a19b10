"""The email channel's two jinja2 environments, over the cards' templates.

``EMAIL_HTML`` is the shared HTML environment (``cards.html``: autoescaped, every value made
visible first) for the HTML part; ``EMAIL_TEXT`` writes the text part, where nothing is
HTML-escaped but every value still goes through ``visible`` (a control character, a
right-to-left override or a lone CR in an argument is shown, never obeyed). Times are shown in
the recipient's time zone (``local``: their ``people:`` ``tz``, else UTC), naming which.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import jinja2

from cards.html import html_environment
from cards.notices import mention_name
from cards.templating import LOADER
from cards.text import Flavor, truncate, visible


def local(moment: datetime, tz: str | None = None) -> str:
    """``moment`` as its reader reads it: "Sat 5 Dec 2026, 15:30 CET (Europe/Berlin)" in
    their time zone, or "Sat 5 Dec 2026, 14:30 UTC" when they have none (or it is unknown)."""
    zone = None
    if tz:
        try:
            zone = ZoneInfo(tz)
        except (ValueError, ZoneInfoNotFoundError):
            zone = None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    shown = moment.astimezone(zone or UTC)
    stamp = f"{shown:%a} {shown.day} {shown:%b %Y}, {shown:%H:%M}"
    if zone is None:
        return f"{stamp} UTC"
    return f"{stamp} {shown.tzname()} ({tz})"


def _finalize(value: object) -> object:
    return "" if value is None else visible(str(value))


def _clip(value: object, limit: int = 4000) -> str:
    return "" if value is None else truncate(str(value), limit, Flavor.PLAIN)


def _environments() -> tuple[jinja2.Environment, jinja2.Environment]:
    html = html_environment(LOADER)
    text = jinja2.Environment(
        loader=LOADER,
        autoescape=False,  # the text part: shown as written, after ``visible``
        finalize=_finalize,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    text.filters["clip"] = _clip
    for env in (html, text):
        env.filters["local"] = local
        env.filters["mention_name"] = mention_name
    return html, text


EMAIL_HTML, EMAIL_TEXT = _environments()
