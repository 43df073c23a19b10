"""Build a real engine (real database, real interpreter) for tests, with a manual clock."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from engine.assembly import Engine, EngineOptions
from engine.config import parse_config
from engine.domain.model import Principal, Role, RunStatus
from engine.ports import Clock
from tests.support.clock import ManualClock
from tests.support.ids import SequentialIds
from tests.support.waiting import until

PEOPLE = """
people:
  alice: {email: alice@example.com, slack: U0ALICE01, teams: aad-alice}
  bob: {email: bob@example.com, slack: U0BOB0001, teams: aad-bob}
  carol: {email: carol@example.com, slack: U0CAROL01, teams: aad-carol}
  dave: {email: dave@example.com, slack: U0DAVE001, teams: aad-dave}
groups:
  finance: [alice, bob, carol]
admins: [alice]
approvers: [finance]
"""


def make_engine(
    db_url: str,
    workflows_yaml: str,
    *,
    clock: Clock | None = None,
    extra: str = "",
    server: str = "{workers: 8, leaseSeconds: 30, pollSeconds: 0.05}",
    name: str = "id",
    people: str = PEOPLE,
    **options: Any,
) -> Engine:
    """An engine on ``db_url``; ``name`` keeps ids and the lease owner apart when a test runs
    several engines (replicas) on one database. ``people``: the people, groups, admins and
    approvers sections (``PEOPLE`` unless a test edits them, as an operator would)."""
    text = (
        f"database: {{url: '{db_url}'}}\n"
        f"server: {server}\n"
        + people
        + textwrap.dedent(extra)
        + "workflows:\n"
        + textwrap.indent(textwrap.dedent(workflows_yaml), "  ")
    )
    config = parse_config(text, {})
    opts = EngineOptions(
        clock=clock or ManualClock(), ids=SequentialIds(name), owner=f"{name}-worker", **options
    )
    return Engine(config, opts)


def person(name: str, role: Role = Role.APPROVER) -> Principal:
    return Principal(name=name, role=role, person=name)


AGENT = Principal(name="token:agent-1", role=Role.AGENT, token="agent-1")


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll an async predicate until it returns something truthy (real work is in flight in
    the workers; this waits for it, it does not stand in for a clock)."""
    return await until(predicate, timeout)


async def wait_status(engine: Engine, run_id: str, *statuses: RunStatus) -> RunStatus:
    async def check() -> RunStatus | None:
        run = await engine.store.get_run(run_id)
        return run.status if run.status in statuses else None

    result: RunStatus = await wait_for(check)
    return result
