"""The Slack Home tab: a person's pending approvals and recent decisions, kept current.

Everything is asserted on what the fake Slack received through ``views.publish`` (its
``homes``: the last Home tab published for each member), after signed events and clicks.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import urlencode

from engine.domain.model import JournalEvent, Role, TakeoverStatus
from tests.integration.slack.harness import (
    CHANNEL,
    TEAM,
    USERS,
    SlackHarness,
    running_slack,
    signed_headers,
)
from tests.integration.slack.test_slack_commands import JSON
from tests.support.clock import ManualClock
from tests.support.engines import wait_for

FLOWS = f"""
refund:
  nodes:
    - {{id: approve, type: approval, reason: "Refund {{{{ input.order }}}}",
       approvers: [finance], channels: ["slack:{CHANNEL}"], timeoutMinutes: 30}}
    - {{id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {{order: "{{{{ input.order }}}}", note: "{{{{ input.note }}}}"}}}}
quiet:
  nodes:
    - {{id: approve, type: approval, reason: "Quiet {{{{ input.order }}}}",
       approvers: [finance], channels: [web]}}
    - {{id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {{order: "{{{{ input.order }}}}"}}}}
"""
ALICE = USERS["alice"]


def event_body(event: dict[str, Any], event_id: str) -> str:
    return json.dumps(
        {
            "type": "event_callback",
            "team_id": TEAM,
            "api_app_id": "A0SIGNOFF",
            "event_id": event_id,
            "event_time": int(time.time()),
            "event": event,
        }
    )


async def open_home(h: SlackHarness, user: str, event_id: str) -> None:
    body = event_body(
        {"type": "app_home_opened", "user": user, "channel": "D0HOME", "tab": "home"}, event_id
    )
    status, _ = await h.send(body, {**signed_headers(body), **JSON})
    assert status == 200


async def home_click(h: SlackHarness, user: str, action_id: str, value: str) -> int:
    """A click on a button of ``user``'s Home tab: a ``block_actions`` from a view, which
    carries no ``response_url``."""
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "signoff-test"},
        "user": {"id": user, "team_id": TEAM},
        "api_app_id": "A0SIGNOFF",
        "trigger_id": h.slack.trigger(),
        "container": {"type": "view", "view_id": f"VH{user}"},
        "view": {"id": f"VH{user}", "type": "home", "callback_id": "signoff_home"},
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "x",
                "value": value,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    body = urlencode({"payload": json.dumps(payload)})
    status, _ = await h.send_signed(body)
    return status


def texts(view: dict[str, Any]) -> str:
    """Every text of a view, in order, one per line."""
    out: list[str] = []
    for block in view["blocks"]:
        for obj in (block.get("text"), *block.get("elements", []), *block.get("fields", [])):
            if isinstance(obj, dict) and isinstance(obj.get("text"), str):
                out.append(obj["text"])
            elif isinstance(obj, dict) and isinstance(obj.get("text"), dict):
                out.append(obj["text"]["text"])
    return "\n".join(out)


def buttons(view: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (e["action_id"], e.get("value", ""))
        for b in view["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
    ]


async def home_of(h: SlackHarness, user: str, condition: Any) -> dict[str, Any]:
    """The Home tab published for ``user`` once ``condition(view)`` holds."""

    async def check() -> dict[str, Any] | None:
        view = h.slack.homes.get(user)
        return view if view is not None and condition(view) else None

    found: dict[str, Any] = await wait_for(check)
    return found


async def started(
    h: SlackHarness, workflow: str, order: str, clock: ManualClock, minutes: float = 10
) -> str:
    run_id = await h.start(workflow, {"order": order, "note": f"<!channel> {order}"})
    request = await h.request_of(run_id)
    clock.advance(minutes=minutes)  # the next request is newer
    return request.id


async def test_home_lists_pending_newest_first_and_recent_decisions(migrated_db_url: str) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        first = await started(h, "refund", "B-1", clock)
        await h.api.token("bob", Role.APPROVER, "bob")
        run_id = (await h.engine.store.get_takeover(first)).run_id
        path = f"/v1/runs/{run_id}/takeover/{first}/grant"
        status, _ = await h.api.call("POST", path, as_="bob", json={"release": True})
        assert status == 200
        second = await started(h, "refund", "B-2", clock)
        third = await started(h, "quiet", "B-3", clock)  # no Slack card: listed all the same

        await open_home(h, USERS["bob"], "Ev0HOME1")
        # Published on opening, after the last request: earlier publishes (their cards') may
        # show an earlier time left.
        view = await home_of(
            h, USERS["bob"], lambda v: "2 requests wait" in texts(v) and "in 10 min" in texts(v)
        )
        shown = texts(view)
        assert view["type"] == "home" and len(view["blocks"]) <= 100
        assert shown.index("Quiet B-3") < shown.index("Refund B-2")  # newest first
        assert "Refund B-1" not in shown.split("Your recent decisions")[0]  # decided: not pending
        assert "2 requests wait for you, newest first." in shown
        assert "Expires in 10 min" in shown and "Expires in 20 min" in shown  # time left
        # The exact arguments, previewed in a code block, escaped (no @channel ping).
        assert '"note": "&lt;!channel&gt; B-2",\n  "order": "B-2"' in shown
        assert ("signoff_grant", second) in buttons(view)
        assert ("signoff_deny", second) in buttons(view)
        assert ("signoff_takeover", third) in buttons(view)
        assert ("signoff_home_arguments", third) in buttons(view)
        recent = shown.split("Your recent decisions")[1]
        assert "✅ Approved" in recent and "Refund B-1" in recent

        # "Show arguments" opens a dialog with all of them.
        assert await home_click(h, USERS["bob"], "signoff_home_arguments", second) == 200

        async def dialog() -> list[dict[str, Any]]:
            return h.slack.views

        (opened,) = await wait_for(dialog)
        assert opened["type"] == "modal" and opened["title"]["text"] == "Arguments"
        assert '"order": "B-2"' in texts(opened) and "Refund B-2" in texts(opened)

        # dave is in people: but approves nothing here: an empty tab, and no arguments to see.
        await open_home(h, USERS["dave"], "Ev0HOME2")
        dave = await home_of(h, USERS["dave"], lambda v: True)
        assert "Nothing is waiting for your decision." in texts(dave)
        assert buttons(dave) == []
        assert await home_click(h, USERS["dave"], "signoff_home_arguments", second) == 200
        dave = await home_of(h, USERS["dave"], lambda v: "Only the request's" in texts(v))
        assert "Only the request's approvers may see its arguments." in texts(dave)
        assert len(h.slack.views) == 1  # bob's dialog only
        assert "B-2" not in texts(dave)

        # A member Signoff cannot place gets a tab telling them how to get linked.
        h.slack.add_user("U0STRANGER", "stranger@example.com")
        await open_home(h, "U0STRANGER", "Ev0HOME3")
        stranger = await home_of(h, "U0STRANGER", lambda v: True)
        assert "add your Slack user id (U0STRANGER) or your email address" in texts(stranger)
        assert buttons(stranger) == []


async def test_a_home_click_decides_once_and_republishes(migrated_db_url: str) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        request_id = await started(h, "refund", "B-1", clock)
        await open_home(h, USERS["bob"], "Ev0HOME1")
        await home_of(h, USERS["bob"], lambda v: ("signoff_grant", request_id) in buttons(v))

        # A double click from the Home tab: one decision, the loser told on the tab.
        statuses = await asyncio.gather(
            *(home_click(h, USERS["bob"], "signoff_grant", request_id) for _ in range(2))
        )
        assert statuses == [200, 200]
        request = await h.engine.store.get_takeover(request_id)
        assert request.status == TakeoverStatus.RELEASED and request.decided_by == "bob"
        journal = await h.engine.store.journal(request.run_id)
        assert [e.event for e in journal].count(JournalEvent.TAKEOVER_GRANTED) == 1
        view = await home_of(
            h,
            USERS["bob"],
            lambda v: (
                ("signoff_grant", request_id) not in buttons(v)
                and "Refund B-1" in texts(v).split("Your recent decisions")[1]
            ),
        )
        assert "Nothing is waiting for your decision." in texts(view)

        async def told() -> bool:
            return any(
                "Already approved by"
                in texts(
                    c.args["view"]
                    if isinstance(c.args["view"], dict)
                    else json.loads(c.args["view"])
                )
                for c in h.slack.calls_of("views.publish", ok=True)
                if c.args.get("user_id") == USERS["bob"]
            )

        assert await wait_for(told)


async def test_a_decision_elsewhere_or_an_expiry_republishes_home(migrated_db_url: str) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        in_channel = await started(h, "refund", "B-1", clock, minutes=1)
        expiring = await started(h, "refund", "B-2", clock, minutes=1)
        over_api = await started(h, "refund", "B-3", clock, minutes=1)
        await open_home(h, ALICE, "Ev0HOME1")
        await home_of(h, ALICE, lambda v: "3 requests wait" in texts(v))

        # bob denies one over the API: alice's tab drops it.
        await h.api.token("bob", Role.APPROVER, "bob")
        run_id = (await h.engine.store.get_takeover(over_api)).run_id
        path = f"/v1/runs/{run_id}/takeover/{over_api}/deny"
        status, _ = await h.api.call("POST", path, as_="bob", json={"notes": "no"})
        assert status == 200
        view = await home_of(h, ALICE, lambda v: "2 requests wait" in texts(v))
        assert ("signoff_grant", over_api) not in buttons(view)

        # bob approves on the channel's card: alice's tab drops the request.
        card = next(m for m in h.slack.posted(CHANNEL) if m.blocks)
        status, _ = await h.click(USERS["bob"], "signoff_grant", in_channel, message_ts=card.ts)
        assert status == 200
        view = await home_of(h, ALICE, lambda v: "1 request waits" in texts(v))
        assert ("signoff_grant", in_channel) not in buttons(view)
        assert ("signoff_grant", expiring) in buttons(view)

        # The other one expires: the sweep's card update republishes her tab too.
        clock.advance(minutes=29)  # 12:32: B-2 (12:01 + 30 min) is past its deadline
        assert await h.engine.sweeper.sweep_once() == 1
        view = await home_of(h, ALICE, lambda v: "Nothing is waiting" in texts(v))
        assert buttons(view) == []


async def test_a_bigger_inbox_pages_with_more(migrated_db_url: str) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        for n in range(45):
            await h.start("quiet", {"order": f"Q-{n:02d}"})
            clock.advance(seconds=1)
        await wait_for(lambda: _count(h, 45))

        await open_home(h, ALICE, "Ev0HOME1")
        first = await home_of(h, ALICE, lambda v: "45 requests wait" in texts(v))
        assert len(first["blocks"]) <= 100
        assert "(page 1 of 3)" in texts(first)
        assert "Quiet Q-44" in texts(first) and "Quiet Q-25" in texts(first)
        assert "Quiet Q-24" not in texts(first)
        assert ("signoff_home_page", "1") in buttons(first)

        assert await home_click(h, ALICE, "signoff_home_page", "1") == 200
        second = await home_of(h, ALICE, lambda v: "(page 2 of 3)" in texts(v))
        assert "Quiet Q-24" in texts(second) and "Quiet Q-05" in texts(second)
        assert "Quiet Q-25" not in texts(second)
        assert ("signoff_home_page", "0") in buttons(second)  # back to the newest
        assert ("signoff_home_page", "2") in buttons(second)
        assert h.slack.calls_of("views.publish", ok=False) == []  # Slack took every one


async def _count(h: SlackHarness, n: int) -> bool:
    found = await h.engine.store.list_takeovers(statuses=[TakeoverStatus.PENDING], limit=1000)
    return len(found) >= n


async def test_a_rate_limited_publish_waits_and_publishes(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        h.slack.fail_next("views.publish", "ratelimited", 429)  # Retry-After: 1
        await open_home(h, ALICE, "Ev0HOME1")
        await home_of(h, ALICE, lambda v: "Nothing is waiting" in texts(v))
        published = [c for c in h.slack.calls_of("views.publish") if c.args["user_id"] == ALICE]
        assert [c.status for c in published] == [429, 200]
        assert published[1].at - published[0].at >= 0.9  # it waited out the Retry-After


async def test_take_over_and_release_from_home(migrated_db_url: str) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        request_id = await started(h, "refund", "B-1", clock)
        await open_home(h, ALICE, "Ev0HOME1")
        await home_of(h, ALICE, lambda v: ("signoff_takeover", request_id) in buttons(v))

        assert await home_click(h, ALICE, "signoff_takeover", request_id) == 200
        view = await home_of(h, ALICE, lambda v: ("signoff_release", request_id) in buttons(v))
        assert "You took this over: the run waits until you release it" in texts(view)
        assert ("signoff_grant", request_id) not in buttons(view)

        assert await home_click(h, ALICE, "signoff_release", request_id) == 200
        view = await home_of(h, ALICE, lambda v: "Nothing is waiting" in texts(v))
        request = await h.engine.store.get_takeover(request_id)
        assert request.status == TakeoverStatus.RELEASED and request.released_by == "alice"
        assert "Refund B-1" in texts(view).split("Your recent decisions")[1]
