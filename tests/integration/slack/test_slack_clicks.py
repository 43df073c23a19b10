"""Who may click, and what happens when many do: signatures, authorization, exactly one decision.

Every request is signed the way Slack signs it; the tampered ones must be refused with 401
before anything changes, and the good ones must be decided by the engine exactly once, however
many arrive at once and however often each is delivered.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from urllib.parse import parse_qs, urlencode

from engine.domain.model import JournalEvent, RunStatus, TakeoverStatus
from tests.integration.slack.harness import (
    CHANNEL,
    SECRET,
    USERS,
    SlackHarness,
    running_slack,
    signed_headers,
)
from tests.support.engines import wait_for, wait_status
from tests.support.waiting import quiet

FLOWS = f"""
refund:
  nodes:
    - {{id: approve, type: approval, reason: "Refund {{{{ input.order }}}}",
       approvers: [finance], channels: ["slack:{CHANNEL}"]}}
    - {{id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {{order: "{{{{ input.order }}}}"}}}}
"""
RACE_FLOWS = f"""
race:
  nodes:
    - {{id: approve, type: approval, approvers: [clickers], channels: ["slack:{CHANNEL}"]}}
    - {{id: act, type: connector, connector: demo-ledger, action: refund,
       args: {{order: "{{{{ input.order }}}}"}}}}
"""

CLICKERS = {f"clicker{i:02d}": f"U0RACE{i:03d}" for i in range(20)}
RACE_PEOPLE = (
    "people:\n"
    "  alice: {email: alice@example.com, slack: U0ALICE01}\n"
    + "".join(f"  {name}: {{slack: {uid}}}\n" for name, uid in CLICKERS.items())
    + "groups:\n"
    + f"  clickers: [{', '.join(CLICKERS)}]\n"
    + "admins: [alice]\n"
)


async def pending_request(h: SlackHarness, workflow: str = "refund") -> tuple[str, str]:
    run_id = await h.start(workflow, {"order": "B-1"})
    request = await h.request_of(run_id)
    return run_id, request.id


async def unchanged(h: SlackHarness, run_id: str, request_id: str, journal_size: int) -> None:
    request = await h.engine.store.get_takeover(request_id)
    assert request.status == TakeoverStatus.PENDING and request.votes == ()
    assert len(await h.engine.store.journal(run_id)) == journal_size


async def test_bad_signatures_are_refused_and_change_nothing(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await wait_status(h.engine, run_id, RunStatus.WAITING)
        size = len(await h.engine.store.journal(run_id))
        body, _ = h.action_body(USERS["bob"], "signoff_grant", request_id)

        def aged(seconds: int) -> dict[str, str]:
            """Signed now, with a timestamp ``seconds`` in the past (negative: the future)."""
            return signed_headers(body, timestamp=int(time.time()) - seconds)

        tampered = body.replace("signoff_grant", "signoff_takeover")
        cases = {
            "tampered body": lambda: (tampered, signed_headers(body)),
            "wrong secret": lambda: (body, signed_headers(body, secret="not-" + SECRET)),
            # Slack allows 300 s either way. The margins are wide because the request is
            # checked a moment after it is signed: on a crowded machine one second passed
            # between the two, and "301 s ahead" arrived 300 s ahead, which is allowed.
            "330 s old": lambda: (body, aged(330)),
            "330 s ahead": lambda: (body, aged(-330)),
            "no signature": lambda: (body, {"Content-Type": "application/x-www-form-urlencoded"}),
        }
        for name, case in cases.items():
            status, _ = await h.send(*case())
            assert status == 401, name
            await unchanged(h, run_id, request_id, size)
        assert h.slack.responses == []

        status, _ = await h.send(body, aged(270))  # well inside the 300 s
        assert status == 200
        granted = await h.engine.store.get_takeover(request_id)
        assert granted.status == TakeoverStatus.RELEASED and granted.decided_by == "bob"


async def test_only_approvers_may_decide_and_others_are_told(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await wait_status(h.engine, run_id, RunStatus.WAITING)
        size = len(await h.engine.store.journal(run_id))

        # dave is a person, but not in finance; U0STRANGER is nobody Signoff knows.
        for user in (USERS["dave"], "U0STRANGER"):
            for action in ("signoff_grant", "signoff_takeover", "signoff_deny"):
                status, key = await h.click(user, action, request_id)
                assert status == 200
                told = await h.wait_told(key)
                if user == "U0STRANGER":  # told how to get linked, in their words
                    assert told.startswith("Signoff doesn't know you on Slack"), told
                    assert "(U0STRANGER) or email under people: in app.yaml" in told, told
                else:
                    assert told.startswith("You are not an approver for this request"), told
                await unchanged(h, run_id, request_id, size)
        assert h.slack.views == []  # no deny modal for someone who may not deny

        # A modal submitted by a non-approver (a forged view) is refused inside the modal.
        status, body = await h.submit_deny(USERS["dave"], request_id, "no")
        assert body["response_action"] == "errors"
        await unchanged(h, run_id, request_id, size)


async def test_the_requester_may_not_approve_their_own_run(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        # alice (admin, in finance) starts the run herself through the API.
        status, run = await h.api.call(
            "POST", "/v1/runs", as_="admin", json={"workflow": "refund", "input": {"order": "S"}}
        )
        assert status == 201 and run["requestedBy"] == "alice"
        request = await h.request_of(run["id"])
        await wait_status(h.engine, run["id"], RunStatus.WAITING)
        size = len(await h.engine.store.journal(run["id"]))
        status, key = await h.click(USERS["alice"], "signoff_grant", request.id)
        assert status == 200
        assert "you started this run" in (await h.wait_told(key)).lower()
        await unchanged(h, run["id"], request.id, size)


async def test_two_hundred_clicks_delivered_twice_make_one_decision(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, RACE_FLOWS, people=RACE_PEOPLE) as h:
        run_id, request_id = await pending_request(h, "race")
        await wait_status(h.engine, run_id, RunStatus.WAITING)

        bodies = []
        for i in range(200):  # 20 users, 10 clicks each; every click delivered twice
            user = list(CLICKERS.values())[i % 20]
            body, _ = h.action_body(user, "signoff_grant", request_id, response_key=i)
            bodies.append((body, signed_headers(body)))  # the same bytes both times
        sends = [h.send(body, headers) for body, headers in bodies for _ in range(2)]
        started = time.perf_counter()
        results = await asyncio.gather(*sends)
        elapsed = time.perf_counter() - started
        assert [status for status, _ in results] == [200] * 400, elapsed

        decided = await h.engine.store.get_takeover(request_id)
        assert decided.status == TakeoverStatus.RELEASED
        winner = next(n for n in CLICKERS if n == decided.decided_by)
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        journal = await h.engine.store.journal(run_id)
        assert Counter(e.event for e in journal)[JournalEvent.TAKEOVER_GRANTED] == 1
        executed = [e for e in await h.engine.store.ledger(run_id=run_id) if e["step_id"] == "act"]
        assert len(executed) == 1

        # Every click but the winning one is told who won, once: the second delivery of the
        # same signed bytes is acknowledged and does nothing at all (bot/slack/once.py).
        async def all_told() -> bool:
            return len(h.slack.responses) >= 199

        await wait_for(all_told, timeout=30)
        await quiet(0.2)  # nothing more arrives
        assert len(h.slack.responses) == 199
        expected = f"Already approved by <@{CLICKERS[winner]}>; nothing changed."
        assert {r.body["text"] for r in h.slack.responses} == {expected}
        assert all(r.body["response_type"] == "ephemeral" for r in h.slack.responses)
        per_click = Counter(r.key for r in h.slack.responses)
        assert set(per_click.values()) == {1} and len(per_click) == 199


async def test_signed_payloads_json_cannot_read_are_refused_400(migrated_db_url: str) -> None:
    """Correctly signed, but holding what JSON has no place for (NaN, a huge number, a NUL,
    a lone surrogate, deep nesting): 400 with the reason, nothing decided, nobody told."""
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await wait_status(h.engine, run_id, RunStatus.WAITING)
        size = len(await h.engine.store.journal(run_id))
        body, _ = h.action_body(USERS["bob"], "signoff_grant", request_id)
        payload = json.loads(parse_qs(body)["payload"][0])
        text = json.dumps(payload)
        assert text.startswith('{"type": "block_actions"')
        extra = {
            "NaN": '{"x": NaN, ',
            "Infinity": '{"x": -Infinity, ',
            "1e400": '{"x": 1e400, ',
            "a huge integer": '{"x": ' + "9" * 30 + ", ",
            "a NUL": '{"x": "a\\u0000b", ',
            "a lone surrogate": '{"x": "\\ud800", ',
            "deep nesting": '{"x": ' + "[" * 100 + "]" * 100 + ", ",
        }
        for name, start in extra.items():
            forged = urlencode({"payload": start + text[1:]})
            status, answer = await h.send_signed(forged)
            assert status == 400, (name, status, answer)
            assert json.loads(answer)["error"] == "invalid_payload", name
            await unchanged(h, run_id, request_id, size)
        # A slash command's form field with a NUL is refused the same way.
        status, answer = await h.send_signed(urlencode({"command": "/signoff", "text": "a\0b"}))
        assert status == 400 and "NUL" in json.loads(answer)["message"]
        await quiet(0.1)
        assert h.slack.responses == []
