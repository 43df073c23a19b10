"""Reloading ``app.yaml`` while serving: ``people:`` and what it feeds, nothing else.

An operator adds a person (or a Slack id) and reloads (``signoff reload``, or SIGHUP to
``signoff serve``); the running process must not need a restart for that. ``plan_reload``
decides what a reload does, without changing anything:

* the new file is validated whole, by the same loader as at start (``parse_config``), malformed
  policy rules included (as ``signoff serve`` refuses them): any problem raises ``ConfigError``
  naming its YAML path, and nothing changes;
* the top-level sections that differ from the file running now are found by comparing the
  YAML as written. Of those, ``LIVE_SECTIONS`` (``people``, and the ``groups``, ``admins`` and
  ``approvers`` that name people) are applied, together or not at all; every other one (the
  database, the server, workflows, connectors, channels ...) is reported as needing a restart
  and keeps running as it is;
* the people applied must fit the sections that keep running: the running file with the new
  live sections spliced in is validated again (a workflow still running that names a person the
  new file removed is refused, with its path), so the running configuration stays one a start
  would accept.

``Engine.reload`` swaps the result in; ``bot.reload`` reads the file and reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.config.app import AppConfig
from engine.config.loading import TOP_KEYS, parse_config, parse_data
from engine.config.yaml_text import load_yaml
from engine.domain.errors import ConfigError

__all__ = ["LIVE_SECTIONS", "Reload", "plan_reload", "sections_of"]

LIVE_SECTIONS = ("people", "groups", "admins", "approvers")
"""The sections a reload applies: who the people are, and the lists built from them. Each
fills the ``AppConfig`` field of the same name (``Engine.reload`` changes only these)."""


@dataclass(frozen=True)
class Reload:
    """What a reload does: run with ``config`` (the running one when nothing applies), whose
    ``applied`` sections changed; ``needs_restart`` changed too but are not applied."""

    config: AppConfig
    sections: Mapping[str, Any]  # the sections running now, as written (the next reload's base)
    applied: tuple[str, ...]
    needs_restart: tuple[str, ...]


def plan_reload(
    running: AppConfig,
    before: Mapping[str, Any],
    new_text: str,
    env: Mapping[str, str],
    source: str,
) -> Reload:
    """What reloading ``new_text`` over ``running`` (whose sections as written are ``before``,
    ``sections_of`` the file it was loaded from) does. Raises ``ConfigError`` (nothing to
    apply) when the new file is invalid, or when its people do not fit the sections that keep
    running."""
    new = parse_config(new_text, env, source)
    if new.rule_problems:
        raise ConfigError(list(new.rule_problems))
    after = sections_of(new_text, source)
    changed = [k for k in TOP_KEYS if before.get(k) != after.get(k)]
    applied = tuple(k for k in changed if k in LIVE_SECTIONS)
    needs_restart = tuple(k for k in changed if k not in LIVE_SECTIONS)
    if not applied:
        return Reload(running, before, (), needs_restart)
    spliced = {k: v for k, v in before.items() if k not in LIVE_SECTIONS}
    spliced.update({k: v for k, v in after.items() if k in LIVE_SECTIONS})
    try:
        fitted = parse_data(spliced, env, source)
        problems = list(fitted.rule_problems)  # a rule naming someone gone: refused as well
    except ConfigError as exc:
        problems = exc.problems
    if problems:
        keeps = ", ".join(needs_restart) or "sections"
        raise ConfigError(
            [
                f"{problem} (the running {keeps}, which need a restart to change)"
                for problem in problems
            ]
        )
    config = dataclasses.replace(running, **{f: getattr(fitted, f) for f in LIVE_SECTIONS})
    return Reload(config, spliced, applied, needs_restart)


def sections_of(text: str, source: str) -> dict[str, Any]:
    """The top-level sections of a file the loader accepted, as written."""
    data = load_yaml(text, source, [])
    return dict(data) if isinstance(data, dict) else {}
