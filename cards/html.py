"""The one HTML jinja2 environment: autoescaped, every value made visible first.

The web channel's cards (``cards.web.templating``) and the server's own pages
(``bot.console.pages``) build theirs with ``html_environment``, each with its own loader, so a
card fragment and the page around it keep the same escaping rules (``cards.templating``'s
module docstring, **HTML**).
"""

from __future__ import annotations

from datetime import UTC, datetime

import jinja2
from markupsafe import Markup

from cards.templating import plain_date
from cards.text import Flavor, truncate, visible


def _finalize(value: object) -> object:
    """None prints nothing; ``Markup`` stays as it is; anything else goes through ``visible``
    (then autoescape escapes it)."""
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


def html_environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    """An autoescaped environment over ``loader`` with the visible-first finalizer, strict
    undefined values and the filters ``iso``, ``plain_date`` and ``clip``."""
    env = jinja2.Environment(
        loader=loader,
        autoescape=True,
        finalize=_finalize,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update({"iso": _iso, "plain_date": plain_date, "clip": _clip})
    return env
