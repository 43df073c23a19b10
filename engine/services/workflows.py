"""Workflows stored through the API (``POST /v1/workflows``) beside those of ``app.yaml``:
validated like ``app.yaml``'s, kept in the database so that every replica sees them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from engine.config import AppConfig
from engine.domain.errors import Conflict
from engine.ports import Clock


class WorkflowStore(Protocol):
    """The store's stored workflows."""

    async def stored_workflows(self) -> dict[str, dict[str, Any]]: ...
    async def put_workflow(
        self, name: str, definition: dict[str, Any], by: str, now: datetime
    ) -> bool: ...


class StoredWorkflows:
    """Storing and reading the API's workflows."""

    def __init__(self, config: AppConfig, store: WorkflowStore, clock: Clock) -> None:
        self.config = config
        self._store = store
        self._clock = clock

    async def definitions(self) -> dict[str, dict[str, Any]]:
        """The stored definitions by name (``app.yaml``'s are not among them)."""
        return await self._store.stored_workflows()

    async def put(self, name: str, nodes: list[Any], by: str) -> tuple[dict[str, Any], bool]:
        """Validate and store the workflow ``{name, nodes}``: ``(definition, created)``.
        ``Conflict`` for a name of ``app.yaml`` (which cannot be replaced); ``ConfigError``
        listing every problem of an invalid one. Its calls may name stored workflows and
        itself."""
        if name in self.config.workflows:
            raise Conflict(f"workflow {name!r} is defined in app.yaml and cannot be replaced")
        definition = {"name": name, "nodes": nodes}
        stored = await self._store.stored_workflows()
        self.config.validate_workflow(name, definition, "", known_workflows=[*stored, name])
        created = await self._store.put_workflow(name, definition, by, self._clock.now())
        return definition, created
