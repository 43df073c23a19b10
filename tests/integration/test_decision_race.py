"""Many people click at once: every takeover decision is one conditional UPDATE, so exactly one
wins, every other gets ``409 already_decided``, and the run resumes exactly once. Real HTTP,
real databases (SQLite's single writer and PostgreSQL's concurrent transactions)."""

from __future__ import annotations

import asyncio
import textwrap
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bot.app import create_app
from bot.keys import ENGINE
from engine.assembly import EngineOptions
from engine.config import parse_config
from engine.domain.model import JournalEvent, Role, RunStatus, TakeoverStatus
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import wait_status
from tests.support.ids import SequentialIds

RACERS = [f"racer{i:02d}" for i in range(50)]

# Fifty people in one group, named by the approval node: the racers are approvers whatever a
# node that names nobody falls back to.
CONFIG = (
    "server: {workers: 8, leaseSeconds: 30, pollSeconds: 0.05, publicUrl: 'http://signoff.test'}\n"
    "people:\n"
    + "".join(f"  {name}: {{email: {name}@example.com}}\n" for name in ["alice", *RACERS])
    + "groups:\n"
    + f"  racers: [{', '.join(RACERS)}]\n"
    + "admins: [alice]\n"
    + "workflows:\n"
    + textwrap.indent(
        textwrap.dedent(
            """
            pay:
              nodes:
                - {id: prepare, type: connector, connector: demo-ledger, action: lookup,
                   args: {order: "{{ input.order }}"}}
                - {id: approve, type: approval, reason: "Pay {{ input.order }}",
                   approvers: [racers], channels: [web]}
                - {id: act, type: connector, connector: demo-ledger, action: refund,
                   args: {order: "{{ input.order }}"}}
            quorum:
              nodes:
                - {id: approve, type: approval, approvers: [racers], approvalsRequired: 2}
                - {id: act, type: connector, connector: demo-ledger, action: refund,
                   args: {order: "{{ input.order }}"}}
            """
        ),
        "  ",
    )
)


@asynccontextmanager
async def race_api(db_url: str) -> AsyncIterator[Api]:
    config = parse_config(f"database: {{url: '{db_url}'}}\n" + CONFIG, {})
    options = EngineOptions(clock=ManualClock(), ids=SequentialIds("id"), owner="race-worker")
    app = create_app(config, options)
    client: TestClient[Any, Any] = TestClient(TestServer(app))
    await client.start_server()
    api = Api(client, app[ENGINE], {})
    await api.token("agent", Role.AGENT)
    await api.token("admin", Role.ADMIN, "alice")
    for name in RACERS:
        await api.token(name, Role.APPROVER, name)
    try:
        yield api
    finally:
        await client.close()


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with race_api(migrated_db_url) as api:
        yield api


async def parked(api: Api, workflow: str = "pay", order: str = "o-1") -> tuple[str, str]:
    status, run = await api.call(
        "POST", "/v1/runs", as_="agent", json={"workflow": workflow, "input": {"order": order}}
    )
    assert status == 201, run
    await wait_status(api.engine, run["id"], RunStatus.WAITING)
    (request,) = await api.engine.store.list_takeovers(run_id=run["id"])
    return run["id"], request.id


async def decide(api: Api, run_id: str, request_id: str, who: str, verb: str) -> tuple[int, Any]:
    body = {"release": True} if verb == "grant" else {"notes": f"{who} says no"}
    return await api.call(
        "POST", f"/v1/runs/{run_id}/takeover/{request_id}/{verb}", as_=who, json=body
    )


def events(journal: list[Any]) -> Counter[JournalEvent]:
    return Counter(e.event for e in journal)


async def test_fifty_grants_one_wins(api: Api) -> None:
    run_id, request_id = await parked(api)
    results = await asyncio.gather(
        *(decide(api, run_id, request_id, who, "grant") for who in RACERS)
    )
    winners = [
        (who, body) for who, (status, body) in zip(RACERS, results, strict=True) if status == 200
    ]
    assert len(winners) == 1, results
    winner, body = winners[0]
    assert body["status"] == "released" and body["decidedBy"] == winner
    losers = [body for status, body in results if status != 200]
    assert [status for status, _ in results].count(409) == 49
    assert {b["error"] for b in losers} == {"already_decided"}
    assert {b["decidedBy"] for b in losers} == {winner}
    assert {b["status"] for b in losers} == {"released"}

    assert await wait_status(api.engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    ledger = await api.engine.store.ledger(run_id=run_id)
    assert [row["action"] for row in ledger] == ["lookup", "refund"]
    counts = events(await api.engine.store.journal(run_id))
    assert counts[JournalEvent.TAKEOVER_GRANTED] == 1
    assert counts[JournalEvent.TAKEOVER_RELEASED] == 1
    assert counts[JournalEvent.RUN_RESUMED] == 1
    request = await api.engine.store.get_takeover(request_id)
    assert request.status == TakeoverStatus.RELEASED
    assert [v.person for v in request.votes] == [winner]


@pytest.mark.parametrize("rounds", [3])
async def test_grant_and_deny_race(api: Api, rounds: int) -> None:
    outcomes = Counter[str]()
    for round_ in range(rounds):
        run_id, request_id = await parked(api, order=f"o-{round_}")
        verbs = ["grant" if i % 2 == round_ % 2 else "deny" for i in range(len(RACERS))]
        results = await asyncio.gather(
            *(
                decide(api, run_id, request_id, who, verb)
                for who, verb in zip(RACERS, verbs, strict=True)
            )
        )
        ok = [
            (verb, body)
            for verb, (status, body) in zip(verbs, results, strict=True)
            if status == 200
        ]
        assert len(ok) == 1, results
        verb, body = ok[0]
        outcomes[verb] += 1
        assert all(
            status == 409 and body["error"] == "already_decided"
            for status, body in results
            if status != 200
        )
        final = "completed" if verb == "grant" else "failed"
        assert await wait_status(api.engine, run_id, RunStatus(final)) == RunStatus(final)
        counts = events(await api.engine.store.journal(run_id))
        actions = [row["action"] for row in await api.engine.store.ledger(run_id=run_id)]
        if verb == "grant":
            assert body["status"] == "released"
            assert counts[JournalEvent.TAKEOVER_RELEASED] == 1
            assert counts[JournalEvent.TAKEOVER_DENIED] == 0
            assert actions == ["lookup", "refund"]
        else:
            assert body["status"] == "denied"
            assert counts[JournalEvent.TAKEOVER_DENIED] == 1
            assert counts[JournalEvent.TAKEOVER_GRANTED] == 0
            assert actions == ["lookup"]
            run = await api.engine.store.get_run(run_id)
            assert run.error is not None and run.error.startswith(f"denied by {body['decidedBy']}")
    assert sum(outcomes.values()) == rounds


async def test_fifty_releases_one_wins(api: Api) -> None:
    run_id, request_id = await parked(api)
    status, body = await api.call(
        "POST", f"/v1/runs/{run_id}/takeover/{request_id}/grant", as_=RACERS[0], json={}
    )
    assert status == 200 and body["status"] == "granted"
    release = f"/v1/runs/{run_id}/takeover/{request_id}/release"
    # Only the person who took it over (or an admin) releases: another approver is refused.
    status, body = await api.call("POST", release, as_=RACERS[1])
    assert status == 403 and "only they or an admin" in body["message"], body
    # The taker's fifty releases at once (double clicks, retries, tabs): one wins.
    results = await asyncio.gather(*(api.call("POST", release, as_=RACERS[0]) for _ in RACERS))
    assert sorted(status for status, _ in results) == [200] + [409] * 49, results
    assert {body["error"] for status, body in results if status == 409} == {"invalid_transition"}
    assert await wait_status(api.engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    counts = events(await api.engine.store.journal(run_id))
    assert counts[JournalEvent.TAKEOVER_RELEASED] == 1
    assert counts[JournalEvent.RUN_RESUMED] == 1
    actions = [row["action"] for row in await api.engine.store.ledger(run_id=run_id)]
    assert actions == ["lookup", "refund"]


async def test_quorum_of_two_counts_exactly_two_votes(api: Api) -> None:
    run_id, request_id = await parked(api, "quorum")
    results = await asyncio.gather(
        *(decide(api, run_id, request_id, who, "grant") for who in RACERS)
    )
    ok = [body for status, body in results if status == 200]
    assert len(ok) == 2, results
    assert sorted(body["status"] for body in ok) == ["pending", "released"]
    assert [status for status, _ in results].count(409) == 48
    request = await api.engine.store.get_takeover(request_id)
    assert request.status == TakeoverStatus.RELEASED
    assert len(request.votes) == 2
    assert await wait_status(api.engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    counts = events(await api.engine.store.journal(run_id))
    assert counts[JournalEvent.TAKEOVER_GRANTED] == 2
    assert counts[JournalEvent.TAKEOVER_RELEASED] == 1
    assert [row["action"] for row in await api.engine.store.ledger(run_id=run_id)] == ["refund"]
