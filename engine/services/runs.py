"""Starting a run: who may, of which workflow, and the idempotency key that makes a retried
request find the run it started."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

from engine.domain.approvers import Roster, acting_agent, person_principal
from engine.domain.call_workflow import is_call_workflow
from engine.domain.errors import InvalidRequest
from engine.domain.model import Principal, Role, Run, Workflow


class WorkflowLookup(Protocol):
    async def get(self, name: str) -> Workflow: ...


class RunCreator(Protocol):
    """Writes the queued run (``engine.assembly``: claimed by this process's workers when one
    of their slots is free). ``(run, created)``: the same idempotency key finds the same run."""

    def __call__(
        self,
        workflow: str,
        input: dict[str, Any],
        *,
        requested_by: str,
        agent: str | None,
        idempotency_key: str | None,
    ) -> Awaitable[tuple[Run, bool]]: ...


class Runs:
    """The runs' use cases the front ends call."""

    def __init__(self, people: Roster, workflows: WorkflowLookup, create: RunCreator) -> None:
        self.people = people  # the configuration's people, admins and groups
        self._workflows = workflows
        self._create = create

    async def start_run(
        self,
        workflow: str,
        input: dict[str, Any],
        who: Principal,
        *,
        idempotency_key: str | None = None,
        agent: str | None = None,
    ) -> tuple[Run, bool]:
        """Queue a run of ``workflow``; the same idempotency key returns the same run."""
        if who.role not in (Role.AGENT, Role.ADMIN, Role.APPROVER):
            raise InvalidRequest("unknown role")
        agent = acting_agent(who, agent)  # Forbidden for another agent's name
        if is_call_workflow(workflow):  # a held call started as a run would skip its policy
            raise InvalidRequest("held calls are made through POST /v1/calls, not as runs")
        await self._workflows.get(workflow)  # NotFound for an unknown workflow
        return await self._create(
            workflow, input, requested_by=who.name, agent=agent, idempotency_key=idempotency_key
        )

    def principal_for_person(self, person: str) -> Principal:
        """A person from ``people:`` acting in chat or on the web page."""
        return person_principal(self.people, person)
