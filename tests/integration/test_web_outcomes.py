"""What a run's approvals came to, on the console: a denied run (which ends ``completed``
through its ``onDeny`` path) is not shown as a green "completed"; an expired request says so,
and one that expired into an automatic approval too. The run page's "Waiting for" follows the
decision live, and every countdown and wait reads "23 h 58 min", not "1438 min"."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from engine.domain.model import RunStatus
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_status
from tests.support.web import (
    REFUND_DEMO,
    link_path,
    page,
    pending_request,
    read_events,
    sign_in,
    submit,
)

TIMEOUTS = """
lenient:
  nodes:
    - {id: approve, type: approval, reason: "Lenient", approvers: [finance], channels: [web],
       timeoutMinutes: 10, timeoutBehavior: auto-approve}
    - {id: act, type: connector, connector: demo-ledger, action: note, args: {text: "done"}}
strict:
  nodes:
    - {id: approve, type: approval, reason: "Strict", approvers: [finance], channels: [web],
       timeoutMinutes: 10, onDeny: after}
    - {id: act, type: connector, connector: demo-ledger, action: note, args: {text: "done"},
       next: end}
    - {id: after, type: connector, connector: demo-ledger, action: note, args: {text: "no"}}
day:
  nodes:
    - {id: approve, type: approval, reason: "A day", approvers: [finance], channels: [web],
       timeoutMinutes: 1440}
"""
NO_BACKGROUND_SWEEP = 3600.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def api(migrated_db_url: str, clock: ManualClock) -> AsyncIterator[Api]:
    async with running_api(
        migrated_db_url,
        REFUND_DEMO + TIMEOUTS,
        clock=clock,
        sweep_interval_seconds=NO_BACKGROUND_SWEEP,
    ) as api:
        yield api


def badge(html: str, run_id: str | None = None) -> str:
    """The status badge's class and text (of ``run_id``'s row in the runs list)."""
    if run_id is not None:
        html = html[html.index(f"/console/runs/{run_id}") :]
    found = re.search(r'<span[^>]*class="(status [^"]*)">([^<]*)</span>', html)
    assert found is not None, html
    return f"{found.group(1)} | {found.group(2)}"


async def _decided(api: Api, workflow: str, verb: str, **fields: str) -> str:
    run, _ = await api.engine.runs.start_run(workflow, {"order": "A-5", "amount": "5"}, AGENT)
    request = await pending_request(api.engine, run.id)
    resp = await submit(api.client, link_path(api.client, request, "bob"), {"action": verb})
    assert resp.status == 303
    await wait_status(api.engine, run.id, RunStatus.COMPLETED)
    return run.id


async def _expired(api: Api, clock: ManualClock, workflow: str) -> str:
    run, _ = await api.engine.runs.start_run(workflow, {}, AGENT)
    await pending_request(api.engine, run.id)
    clock.advance(minutes=11)
    assert await api.engine.sweeper.sweep_once() >= 1
    await wait_status(api.engine, run.id, RunStatus.COMPLETED)
    return run.id


async def test_a_denied_run_shows_denied_not_a_green_completed(api: Api) -> None:
    denied = await _decided(api, "refund-demo", "deny")
    approved = await _decided(api, "refund-demo", "grant")
    await sign_in(api.client, api.tokens["admin"])

    _, run_page = await page(api.client, f"/console/runs/{denied}")
    assert badge(run_page) == "status status--completed outcome outcome--bad | completed · denied"
    _, runs = await page(api.client, "/console/runs")
    assert (
        badge(runs, denied) == "status status--completed outcome outcome--bad | completed · denied"
    )
    assert badge(runs, approved) == (
        "status status--completed outcome outcome--ok | completed · approved"
    )


async def test_expired_requests_say_expired_or_auto_approved(api: Api, clock: ManualClock) -> None:
    strict = await _expired(api, clock, "strict")
    lenient = await _expired(api, clock, "lenient")
    await sign_in(api.client, api.tokens["admin"])

    _, runs = await page(api.client, "/console/runs")
    assert badge(runs, strict).endswith("outcome--bad | completed · expired")
    assert badge(runs, lenient).endswith("outcome--ok | completed · auto-approved")
    _, run_page = await page(api.client, f"/console/runs/{lenient}")
    assert badge(run_page).endswith("| completed · auto-approved")


async def test_the_waiting_line_and_the_badge_follow_the_decision_live(api: Api) -> None:
    await sign_in(api.client, api.tokens["admin"])
    run, _ = await api.engine.runs.start_run("refund-demo", {"order": "A-6", "amount": "6"}, AGENT)
    request = await pending_request(api.engine, run.id)
    _, html = await page(api.client, f"/console/runs/{run.id}")
    assert '<section id="waiting">' in html and f'href="/approvals/{request.id}"' in html
    last = max(e.seq for e in await api.engine.store.journal(run.id))

    stream = await api.client.get(f"/console/runs/{run.id}/events?after={last}")
    await read_events(stream, until="status")
    deny = await submit(api.client, link_path(api.client, request, "bob"), {"action": "deny"})
    assert deny.status == 303
    rest = await read_events(stream, until="end")

    replaced = [data for event, data in rest if event == "replace"]
    waiting = [html for html in replaced if 'id="waiting"' in html]
    assert waiting and waiting[-1].startswith('<section id="waiting" hidden>')
    assert f"/approvals/{request.id}" not in waiting[-1]
    badges = [html for html in replaced if 'id="run-status"' in html]
    assert badges and "completed · denied" in badges[-1] and "outcome--bad" in badges[-1]


async def test_countdowns_and_waits_read_hours_and_minutes(api: Api, clock: ManualClock) -> None:
    run, _ = await api.engine.runs.start_run("day", {}, AGENT)
    request = await pending_request(api.engine, run.id)
    clock.advance(minutes=2)
    await sign_in(api.client, api.tokens["admin"])

    _, approval = await page(api.client, f"/approvals/{request.id}")
    assert 'Expires in <strong id="countdown-left">23 h 58 min</strong>' in approval
    assert "1438 min" not in approval
    _, queue = await page(api.client, "/console")
    assert ">23 h 58 min</td>" in queue and ">2 min</td>" in queue
    clock.advance(minutes=58)
    _, queue = await page(api.client, "/console")
    assert ">23 h</td>" in queue and ">1 h</td>" in queue
