"""Which step an operator's takeover stops the run before: without ``stepId``, the first step
not yet started when the request is made; with one, that step, which must exist and must not
have started (otherwise the API refuses and creates nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.domain.model import JournalEvent, RunStatus, TakeoverStatus
from engine.ports import ConnectorCall
from tests.support.api import Api, running_api
from tests.support.engines import wait_status

FLOW = """
three:
  nodes:
    - {id: one, type: connector, connector: held, action: go, args: {}}
    - {id: two, type: connector, connector: held, action: go, args: {}}
    - {id: three, type: connector, connector: held, action: go, args: {}}
skipping:
  nodes:
    - {id: one, type: connector, connector: held, action: go, args: {}}
    - {id: two, type: connector, connector: held, action: go, args: {}, next: end}
    - {id: three, type: connector, connector: held, action: go, args: {}}
"""
EXTRA = """
connectors:
  held: {type: python, function: "tests.support.engines:unused", actions: {go: {kind: write}}}
"""


class Held:
    """A connector whose call for step ``blocks`` waits until the test lets it return; other
    calls return at once. It records the step of every call."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.blocks = "one"
        self.called = asyncio.Event()
        self.release = asyncio.Event()

    async def call(self, call: ConnectorCall) -> dict[str, bool]:
        step = call.idempotency_key.split(":")[1]
        self.steps.append(step)
        if step == self.blocks:
            self.called.set()
            await self.release.wait()
        return {"ok": True}


@pytest.fixture
def held() -> Held:
    return Held()


@pytest.fixture
async def api(migrated_db_url: str, held: Held) -> AsyncIterator[Api]:
    async with running_api(
        migrated_db_url, FLOW, extra=EXTRA, extra_connectors={"held": held}
    ) as api:
        try:
            yield api
        finally:
            held.release.set()


async def start_blocked(api: Api, held: Held, workflow: str = "three") -> str:
    """A run whose step ``held.blocks`` is in flight (its call waiting on the test)."""
    status, run = await api.call("POST", "/v1/runs", as_="agent", json={"workflow": workflow})
    assert status == 201, run
    await asyncio.wait_for(held.called.wait(), 10)
    return str(run["id"])


async def take_over(api: Api, run_id: str, **body: Any) -> tuple[int, dict[str, Any]]:
    status, reply = await api.call(
        "POST",
        f"/v1/runs/{run_id}/takeover/request",
        as_="admin",
        json={"reason": "let me look", **body},
    )
    return status, reply


async def test_without_step_id_the_run_parks_before_the_first_step_not_started(
    api: Api, held: Held
) -> None:
    run_id = await start_blocked(api, held)
    status, tk = await take_over(api, run_id)
    assert status == 201, tk
    assert tk["stepId"] == "two"  # the step it will wait on, not null
    held.release.set()  # step one returns while the request is open
    await wait_status(api.engine, run_id, RunStatus.WAITING)
    assert held.steps == ["one"]  # step two has not run
    journal = await api.engine.store.journal(run_id)
    waiting = [e for e in journal if e.event == JournalEvent.RUN_WAITING]
    assert [e.step_id for e in waiting] == ["two"]

    base = f"/v1/runs/{run_id}/takeover/{tk['id']}"
    status, body = await api.call("POST", base + "/grant", as_="admin", json={"release": True})
    assert status == 200, body
    await wait_status(api.engine, run_id, RunStatus.COMPLETED)
    assert held.steps == ["one", "two", "three"]  # each step once


async def test_without_step_id_and_no_step_left_the_answer_says_none(api: Api, held: Held) -> None:
    held.blocks = "two"
    run_id = await start_blocked(api, held, "skipping")  # two is the last step (next: end)
    status, tk = await take_over(api, run_id)
    assert status == 201 and tk["stepId"] is None, tk
    held.release.set()
    await wait_status(api.engine, run_id, RunStatus.COMPLETED)  # nowhere to park: it ends
    assert held.steps == ["one", "two"]


@pytest.mark.parametrize("step", ["one", "nope"])
async def test_a_started_or_unknown_step_is_refused_and_nothing_is_created(
    api: Api, held: Held, step: str
) -> None:
    run_id = await start_blocked(api, held)
    status, body = await take_over(api, run_id, stepId=step)
    if step == "nope":
        assert (status, body["error"]) == (404, "not_found"), body
        assert "has no step 'nope'" in body["message"]
        assert "one, two, three" in body["message"]
    else:
        assert (status, body["error"]) == (409, "conflict"), body
        assert "'one'" in body["message"] and "already started" in body["message"]
    assert body["stepId"] == step
    assert await api.engine.store.list_takeovers(run_id=run_id) == []
    events = [e.event for e in await api.engine.store.journal(run_id)]
    assert JournalEvent.TAKEOVER_REQUESTED not in events

    held.release.set()
    await wait_status(api.engine, run_id, RunStatus.COMPLETED)
    assert held.steps == ["one", "two", "three"]


async def test_a_completed_step_is_refused(api: Api, held: Held) -> None:
    held.blocks = "two"
    run_id = await start_blocked(api, held)  # step one has completed, two is in flight
    status, body = await take_over(api, run_id, stepId="one")
    assert (status, body["error"]) == (409, "conflict"), body
    assert await api.engine.store.list_takeovers(run_id=run_id) == []
    held.release.set()
    await wait_status(api.engine, run_id, RunStatus.COMPLETED)


async def test_a_step_not_reached_yet_is_taken_over(api: Api, held: Held) -> None:
    run_id = await start_blocked(api, held)
    status, tk = await take_over(api, run_id, stepId="three")
    assert status == 201 and tk["stepId"] == "three", tk
    held.release.set()
    await wait_status(api.engine, run_id, RunStatus.WAITING)
    assert held.steps == ["one", "two"]


async def _closed_when_the_run_ended(api: Api, run_id: str, request_id: str) -> None:
    await wait_status(api.engine, run_id, RunStatus.COMPLETED)
    request = await api.engine.store.get_takeover(request_id)
    assert request.status == TakeoverStatus.CANCELLED
    assert request.notes == "the run ended before it reached this step"
    journal = await api.engine.store.journal(run_id)
    assert journal[-1].event == JournalEvent.TAKEOVER_CANCELLED
    assert journal[-1].data["requestId"] == request_id
    status, queue = await api.call("GET", "/v1/approvals", as_="admin")
    assert status == 200 and queue["approvals"] == []  # not left in the queue to expire
    cards = [r for r, _, _ in await api.engine.store.outbox_messages() if r.kind == "card_update"]
    assert cards, "the request's card shows it cancelled"


async def test_a_takeover_made_during_the_last_step_is_cancelled_when_the_run_ends(
    api: Api, held: Held
) -> None:
    held.blocks = "three"
    run_id = await start_blocked(api, held)
    status, tk = await take_over(api, run_id, channels=["slack:C0OPS"])
    assert status == 201, tk
    held.release.set()
    await _closed_when_the_run_ended(api, run_id, tk["id"])
    assert held.steps == ["one", "two", "three"]


async def test_a_takeover_of_a_step_the_run_skips_is_cancelled_when_it_ends(
    api: Api, held: Held
) -> None:
    run_id = await start_blocked(api, held, "skipping")
    status, tk = await take_over(api, run_id, stepId="three", channels=["slack:C0OPS"])
    assert status == 201, tk
    held.release.set()
    await _closed_when_the_run_ended(api, run_id, tk["id"])
    assert held.steps == ["one", "two"]
