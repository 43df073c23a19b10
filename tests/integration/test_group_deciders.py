"""Someone asked through a group decides only while the group holds them (issue 29, item 8).

A request stores the people its groups expanded to when it parked, and the names its approvers
were written as. bob, in ``finance`` when a workflow's approval, a default-approvers approval and
a held call parked for it, leaves ``finance`` (staying in ``people:``); after a restart (a new
engine on the same database, under the edited configuration) he decides none of them, and
carol, still in ``finance``, decides each."""

from __future__ import annotations

import pytest

from engine.assembly import Engine
from engine.domain.approvers import APPROVERS_AS_WRITTEN
from engine.domain.errors import Forbidden
from engine.domain.model import RunStatus, TakeoverStatus
from engine.services.calls import CallRequest
from tests.support.engines import AGENT, PEOPLE, make_engine, person, wait_status

FLOWS = """
named:
  nodes:
    - {id: approve, type: approval, approvers: [finance]}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
by-default:
  nodes:
    - {id: approve, type: approval}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
"""
CALLS = """
connectors:
  demo-ledger:
    type: demo-ledger
    actions:
      refund: {kind: write}
policies:
  - {name: refunds, decision: ask, connector: demo-ledger, action: refund, approvers: [finance]}
"""
BOB_LEFT_FINANCE = PEOPLE.replace("finance: [alice, bob, carol]", "finance: [alice, carol]")


async def park_for_finance(engine: Engine) -> list[str]:
    """A run of each workflow and one held call, all waiting for finance; their requests."""
    requests = []
    for workflow in ("named", "by-default"):
        run, _ = await engine.runs.start_run(workflow, {"order": "o-1"}, AGENT)
        await wait_status(engine, run.id, RunStatus.WAITING)
        (request,) = await engine.store.list_takeovers(run_id=run.id)
        requests.append(request.id)
    call = CallRequest(connector="demo-ledger", action="refund", args={"order": "o-2"})
    held = await engine.calls.submit(call, AGENT)
    (request,) = await engine.store.list_takeovers(run_id=held.execution_id)
    return [*requests, request.id]


async def test_who_left_the_group_decides_nothing_it_was_asked_through_it(
    migrated_db_url: str,
) -> None:
    before = make_engine(migrated_db_url, FLOWS, extra=CALLS)
    await before.start()
    try:
        request_ids = await park_for_finance(before)
        for request_id in request_ids:
            request = await before.store.get_takeover(request_id)
            assert request.approvers == ("alice", "bob", "carol")
            assert request.details[APPROVERS_AS_WRITTEN] == ["finance"]
            assert before.approvals.refusal(request, person("bob"), "deny") is None
    finally:
        await before.stop()

    after = make_engine(migrated_db_url, FLOWS, extra=CALLS, people=BOB_LEFT_FINANCE)
    try:
        for request_id in request_ids:
            with pytest.raises(Forbidden, match="bob is no longer among"):
                await after.approvals.grant(request_id, person("bob"), release=True)
            with pytest.raises(Forbidden, match="cannot deny it"):
                await after.approvals.deny(request_id, person("bob"), notes="no")
            assert (await after.store.get_takeover(request_id)).status == TakeoverStatus.PENDING
            granted = await after.approvals.grant(request_id, person("carol"), release=True)
            assert granted.status != TakeoverStatus.PENDING and granted.decided_by == "carol"
    finally:
        await after.stop()
