"""``/v1/people/{name}/away`` and ``/v1/away`` over real HTTP, a real engine and database: a
person sets, reads and ends their own absence, an admin anyone's, others get 403 and bad
input 400, changing nothing; a request made meanwhile asks the delegate too, whose grant is
the absent approver's toward the quorum; once the absence ends, requests go to the person
alone again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.domain.model import JournalEvent, Role, RunStatus
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import wait_status

FLOWS = """
pay:
  nodes:
    - {id: approve, type: approval, reason: "Pay the invoice", approvers: [alice, carol],
       approvalsRequired: 2, channels: [web, "slack:dm"], timeoutMinutes: 1440}
"""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()  # 2026-01-01 12:00 UTC


@pytest.fixture
async def api(migrated_db_url: str, clock: ManualClock) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, FLOWS, clock=clock) as api:
        await api.token("alice", Role.APPROVER, "alice")
        await api.token("agent-alice", Role.AGENT, "alice")
        yield api


async def test_a_person_sets_reads_and_ends_their_own_absence(api: Api) -> None:
    body = {"until": "2026-01-08", "delegate": "bob"}
    status, set_ = await api.call("PUT", "/v1/people/alice/away", as_="alice", json=body)
    assert status == 200, set_
    absence = {
        "person": "alice",
        "delegate": "bob",
        "until": "2026-01-08T00:00:00Z",
        "setBy": "alice",
        "setAt": "2026-01-01T12:00:00Z",
    }
    assert set_ == {"person": "alice", "away": absence}
    assert await api.call("GET", "/v1/people/alice/away", as_="alice") == (200, set_)
    assert await api.call("GET", "/v1/away", as_="admin") == (200, {"away": [absence]})

    status, ended = await api.call("DELETE", "/v1/people/alice/away", as_="alice")
    assert (status, ended) == (200, {"person": "alice", "away": None, "ended": absence})
    assert await api.call("GET", "/v1/people/alice/away", as_="alice") == (
        200,
        {"person": "alice", "away": None},
    )
    status, again = await api.call("DELETE", "/v1/people/alice/away", as_="alice")
    assert (status, again["ended"]) == (200, None)


async def test_an_admin_sets_and_ends_anyones_and_others_are_refused(api: Api) -> None:
    body = {"until": "2026-01-03T09:00:00+01:00", "delegate": "dave"}
    status, set_ = await api.call("PUT", "/v1/people/carol/away", as_="admin", json=body)
    assert status == 200, set_
    assert set_["away"]["setBy"] == "alice" and set_["away"]["until"] == "2026-01-03T08:00:00Z"

    for method, json in (("PUT", body), ("GET", None), ("DELETE", None)):
        status, refused = await api.call(method, "/v1/people/carol/away", as_="bob", json=json)
        assert status == 403, (method, refused)
        assert refused["error"] == "forbidden"
        assert refused["message"] == "only carol or an admin can set or end carol's absence"
        status, refused = await api.call(method, "/v1/people/carol/away", as_="agent", json=json)
        assert status == 403, (method, refused)
    status, refused = await api.call("PUT", "/v1/people/alice/away", as_="agent-alice", json=body)
    assert status == 403 and refused["error"] == "forbidden"
    status, refused = await api.call("GET", "/v1/away", as_="bob")
    assert status == 403 and refused["error"] == "forbidden"

    assert (await api.call("DELETE", "/v1/people/carol/away", as_="admin"))[0] == 200
    assert await api.call("GET", "/v1/away", as_="admin") == (200, {"away": []})


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        # well-formed, refused by a rule: 422
        ({"until": "2025-12-31", "delegate": "bob"}, 422, "must end in the future"),
        ({"until": "2027-01-02", "delegate": "bob"}, 422, "at most 365 days"),
        ({"until": "next week", "delegate": "bob"}, 422, "is no date"),
        ({"until": "2026-01-08", "delegate": "alice"}, 422, "someone else"),
        ({"until": "2026-01-08", "delegate": "mallory"}, 422, "mallory is not in people:"),
        # against the body's schema: 400
        ({"until": "2026-01-08"}, 400, "delegate"),
        ({"until": "2026-01-08", "delegate": "bob", "by": "carol"}, 400, "by"),
        ({"until": "2" * 41, "delegate": "bob"}, 400, "until"),
    ],
)
async def test_bad_input_is_refused_and_changes_nothing(
    api: Api, body: dict[str, Any], code: int, message: str
) -> None:
    status, refused = await api.call("PUT", "/v1/people/alice/away", as_="alice", json=body)
    assert status == code, refused
    assert refused["error"] == "invalid_request" and message in refused["message"]
    assert await api.call("GET", "/v1/away", as_="admin") == (200, {"away": []})


async def test_an_unknown_person_is_not_found(api: Api) -> None:
    status, refused = await api.call("GET", "/v1/people/mallory/away", as_="admin")
    assert (status, refused["error"]) == (404, "not_found")


async def _park(api: Api) -> tuple[str, dict[str, Any]]:
    status, run = await api.call("POST", "/v1/runs", as_="agent", json={"workflow": "pay"})
    assert status == 201, run
    await wait_status(api.engine, run["id"], RunStatus.WAITING)
    status, takeovers = await api.call("GET", f"/v1/runs/{run['id']}/takeover", as_="admin")
    assert status == 200, takeovers
    [request] = takeovers["requests"]
    return run["id"], request


async def test_a_request_made_while_away_asks_the_delegate_whose_grant_is_the_absent_ones(
    api: Api, clock: ManualClock
) -> None:
    body = {"until": "2026-01-08", "delegate": "bob"}
    assert (await api.call("PUT", "/v1/people/alice/away", as_="alice", json=body))[0] == 200
    run_id, request = await _park(api)
    assert request["approvers"] == ["alice", "carol", "bob"]
    # each approver's own chat, the delegate's after the absent approver's
    assert request["channels"] == ["web", "slack:@alice", "slack:@bob", "slack:@carol"]

    path = f"/v1/runs/{run_id}/takeover/{request['id']}"
    status, granted = await api.call("POST", f"{path}/grant", as_="bob", json={})
    assert status == 200, granted
    assert granted["status"] == "pending"
    status, twice = await api.call("POST", f"{path}/grant", as_="alice", json={})
    assert (status, twice["error"]) == (409, "duplicate_vote")
    assert twice["message"] == "bob has already granted this request for alice"
    status, done = await api.call("POST", f"{path}/grant", as_="carol", json={"release": True})
    assert (status, done["status"]) == (200, "released"), done
    await wait_status(api.engine, run_id, RunStatus.COMPLETED)

    status, journal = await api.call("GET", f"/v1/runs/{run_id}/journal", as_="admin")
    entries = journal["events"]
    [delegated] = [e for e in entries if e["event"] == JournalEvent.TAKEOVER_DELEGATED]
    assert delegated["data"]["delegates"] == [
        {"for": "alice", "delegate": "bob", "until": "2026-01-08T00:00:00+00:00"}
    ]
    grants = [e["data"] for e in entries if e["event"] == JournalEvent.TAKEOVER_GRANTED]
    assert [(g["by"], g.get("for"), g["approvals"]) for g in grants] == [
        ("bob", "alice", 1),
        ("carol", None, 2),
    ]

    # Once the absence has ended, a new request asks alice and carol alone.
    clock.advance(days=7)
    _, after = await _park(api)
    assert after["approvers"] == ["alice", "carol"]
    assert after["channels"] == ["web", "slack:@alice", "slack:@carol"]
    assert "delegates" not in after["details"]
