"""The HTML jinja2 environment: autoescaped, every value made visible first."""

from __future__ import annotations

from datetime import UTC, datetime

import jinja2
from markupsafe import Markup

from cards.notices import mention_name
from cards.templating import LOADER, plain_date
from cards.text import Flavor, truncate, visible


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
    loader=LOADER,
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
