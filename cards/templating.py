"""The templates' loader and the escaping contract every output format's environment keeps.

Each channel's package (``cards/<channel>/templating.py``) builds its own jinja2 environment and
filters on these; the templates live in ``cards/templates/<channel>/`` beside the shared
``words.j2``. How escaping cannot be forgotten:

* **JSON outputs (Slack, Teams).** Templates write the JSON structure; every ``{{ ... }}``
  sits inside a JSON string literal. The environment's ``finalize`` accepts only values that a
  filter of *that* environment marked as escaped (``SlackText`` / ``TeamsText``) and writes
  them JSON-string-escaped; a bare ``{{ value }}`` raises ``UnescapedValue`` when rendered. So
  every interpolation names its escaping (``|mrkdwn``, ``|plain``, ``|run``, ``|exact`` ...),
  and each of those applies ``visible`` first. Rendered output is parsed with ``json.loads``,
  so a template slip is an error, never a malformed card.
* **HTML.** ``autoescape=True``, and ``finalize`` passes every non-``Markup`` value through
  ``visible`` before jinja2 escapes it: one environment builder, ``cards.html``, for the web
  channel's cards and the server's pages alike.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import jinja2

LOADER = jinja2.PackageLoader("cards", "templates")


@functools.cache
def _words() -> Any:
    return jinja2.Environment(loader=LOADER).get_template("words.j2").module


def words(name: str) -> Mapping[str, str]:
    """One of ``words.j2``'s sets (``STATE``, ``VERB_PAST`` ...), for text written in Python
    that must say what the cards say."""
    found: Mapping[str, str] = getattr(_words(), name)
    return found


class UnescapedValue(jinja2.TemplateError):
    """A JSON template interpolated a value without an escaping filter."""


def _finalizer(kind: type[str]) -> Callable[[object], str]:
    def finalize(value: object) -> str:
        if not isinstance(value, kind):
            raise UnescapedValue(
                f"interpolated {type(value).__name__} {str(value)[:40]!r} without a "
                f"{kind.__name__} filter"
            )
        return json.dumps(str(value), ensure_ascii=False)[1:-1]

    return finalize


def json_env(kind: type[str], filters: dict[str, Callable[..., Any]]) -> jinja2.Environment:
    """A JSON output format's environment: only ``kind`` values (its filters' results) render."""
    env = jinja2.Environment(
        loader=LOADER,
        autoescape=False,  # JSON: escaping is the finalize + filters contract above
        finalize=_finalizer(kind),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters.update(filters)
    return env


def plain_date(moment: datetime) -> str:
    """The fallback spelling of a time when a client cannot localise it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def render_json(env: jinja2.Environment, name: str, **context: Any) -> Any:
    """Render a JSON template and parse it: a malformed result raises, it is never sent."""
    return json.loads(env.get_template(name).render(**context))
