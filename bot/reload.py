"""Reloading ``app.yaml`` in a serving process (SIGHUP, which ``signoff reload`` sends).

``Reloader`` keeps the sections the process runs with, as written, reads the file again when
asked, has ``engine.config.reloading.plan_reload`` decide (the whole file validated by the
start's loader; only ``people:``, ``groups:``, ``admins:`` and ``approvers:`` applied, all or
nothing), swaps the result in with ``Engine.reload`` and says what happened, one log line each:

    reload of app.yaml: applied people, groups
    reload of app.yaml: server, workflows changed but need a restart; not applied
    reload of app.yaml refused, nothing changed: config error: people.bob.slack: ...

Reading and validating run off the event loop; the swap runs on it, so a request sees the old
people or the new ones, never a mix. Reloads run one at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.assembly import Engine
from engine.config.reloading import Reload, plan_reload, sections_of
from engine.domain.errors import ConfigError

log = logging.getLogger(__name__)


class Reloader:
    """Reloads ``path`` (or text handed in) into ``engine``; ``text`` is what it started from."""

    def __init__(
        self, engine: Engine, text: str, env: Mapping[str, str], path: str | None = None
    ) -> None:
        self.engine = engine
        self.env = env
        self.path = path
        self.source = path or engine.config.source
        self._sections: Mapping[str, Any] = sections_of(text, self.source)
        self._lock = asyncio.Lock()

    async def reload_file(self) -> list[str]:
        """Read the file again and apply it (``reload_text``); its lines, as logged."""
        if self.path is None:
            raise ValueError("this configuration was not read from a file")
        try:
            text = await asyncio.to_thread(Path(self.path).read_text, encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return self._refused([f"{self.path}: cannot read the configuration: {exc}"])
        return await self.reload_text(text)

    async def reload_text(self, text: str) -> list[str]:
        """Apply ``text`` as the configuration file now says; the lines that say what
        happened (also logged: a refusal as an error, sections left for a restart as a
        warning)."""
        async with self._lock:  # the engine's config changes only here, one reload at a time
            running = self.engine.config
            try:
                plan: Reload = await asyncio.to_thread(
                    plan_reload, running, self._sections, text, self.env, self.source
                )
            except ConfigError as exc:
                return self._refused(exc.problems)
            if plan.applied:
                self.engine.reload(plan.config)
                self._sections = plan.sections
            return self._report(plan)

    def _report(self, plan: Reload) -> list[str]:
        lines: list[str] = []
        where = f"reload of {self.source}"
        if plan.applied:
            lines.append(f"{where}: applied {', '.join(plan.applied)}")
            log.info(lines[-1])
        else:
            lines.append(f"{where}: people, groups, admins and approvers unchanged")
            log.info(lines[-1])
        if plan.needs_restart:
            need = "needs" if len(plan.needs_restart) == 1 else "need"
            lines.append(
                f"{where}: {', '.join(plan.needs_restart)} changed but {need} a restart; "
                "not applied"
            )
            log.warning(lines[-1])
        return lines

    def _refused(self, problems: list[str]) -> list[str]:
        lines = [f"reload of {self.source} refused, nothing changed:"]
        lines += [f"config error: {problem}" for problem in problems]
        log.error("\n".join(lines))
        return lines
