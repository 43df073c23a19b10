"""Workflows by name: those of ``app.yaml`` first, then those stored through the API (in the
database, so every replica sees them). Stored definitions are parsed once per version.

A name ``call:<connector>.<action>`` is a held call's synthetic one-step workflow
(``engine.domain.call_workflow``); it exists for every configured connector action and is never
stored, so the interpreter runs held calls like any other run."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from engine.config.workflows import load_workflow
from engine.domain.call_workflow import CallTarget, call_workflow, is_call_workflow
from engine.domain.errors import ConfigError, NotFound
from engine.domain.model import Workflow
from engine.ports.store import WorkflowStore


class WorkflowSource:
    def __init__(
        self,
        configured: Mapping[str, Workflow],
        store: WorkflowStore,
        *,
        connectors: Mapping[str, CallTarget] | None = None,
        check_stored: Callable[[Workflow], list[str]] = lambda workflow: [],
    ) -> None:
        self.configured = dict(configured)
        # What a stored definition names beyond app.yaml's tools (``AppConfig``'s
        # ``stored_tool_problems``): checked again at every parse, so a definition stored before
        # the allow-list, or naming a tool since removed, never runs.
        self.check_stored = check_stored
        self.store = store
        self.connectors = dict(connectors or {})  # what ``call:`` names may target
        self._parsed: dict[str, tuple[str, Workflow]] = {}

    async def get(self, name: str) -> Workflow:
        if name in self.configured:
            return self.configured[name]
        if is_call_workflow(name):
            return call_workflow(name, self.connectors)
        definition = await self.store.stored_workflow(name)
        if definition is None:
            raise NotFound(f"workflow {name!r} does not exist", workflow=name)
        return self._parse(name, definition)

    def fixed(self, name: str) -> Workflow | None:
        """``app.yaml``'s workflows never change while the process runs; a stored one may
        (another replica stores a new version): None for those."""
        return self.configured.get(name)

    async def all(self) -> dict[str, Workflow]:
        out = dict(self.configured)
        for name, definition in (await self.store.stored_workflows()).items():
            if name not in out:
                try:
                    out[name] = self._parse(name, definition)
                except ConfigError:
                    continue  # validated when stored; a later schema change shows up in check
        return out

    def _parse(self, name: str, definition: dict[str, Any]) -> Workflow:
        version = json.dumps(definition, sort_keys=True)
        cached = self._parsed.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        workflow = load_workflow(name, definition, "")
        if problems := self.check_stored(workflow):
            raise ConfigError(problems)
        self._parsed[name] = (version, workflow)
        return workflow
