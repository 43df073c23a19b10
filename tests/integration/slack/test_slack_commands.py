"""``/signoff``: help, pending with links to the cards, and the admins' gate commands (stored,
audited, confirmed in channel; usage lines and refusals ephemeral, and then nothing changes)."""

from __future__ import annotations

import json

from engine.domain.model import Role
from engine.gate.settings import Scope
from tests.integration.slack.harness import (
    CHANNEL,
    USERS,
    SlackHarness,
    running_slack,
    signed_headers,
)
from tests.support.api import running_api
from tests.support.engines import PEOPLE, wait_for

JSON = {"Content-Type": "application/json"}

FLOWS = f"""
refund:
  nodes:
    - {{id: approve, type: approval, reason: "Refund <b>{{{{ input.order }}}}</b>",
       approvers: [finance], channels: ["slack:{CHANNEL}"]}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
"""


async def overrides(h: SlackHarness) -> list[tuple[str, str, str, object]]:
    found = await h.engine.gate.settings.overrides()
    return [(o.scope.value, o.key, o.setting, o.value) for o in found]


async def test_help_and_unknown_commands(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        for text in ("", "help"):
            status, body, _ = await h.command("U0STRANGER", text)
            assert status == 200
            assert "/signoff pending" in body["text"] and "gate threshold" in body["text"]
            assert body.get("response_type") in (None, "ephemeral")
        status, body, _ = await h.command(USERS["bob"], "frobnicate <!channel>")
        assert "Unknown command" in body["text"] and "<!channel>" not in body["text"]
        status, body, _ = await h.command("U0STRANGER", "pending")
        assert "not linked" in body["text"]


async def test_pending_lists_what_you_may_decide_with_links_to_the_cards(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await h.start("refund", {"order": "P-1"})
        request = await h.request_of(run_id)

        async def card_stored() -> list:
            return await h.engine.store.chat_messages(request_id=request.id, kind="card")

        (card,) = await wait_for(card_stored)

        status, body, key = await h.command(USERS["bob"], "pending")
        assert status == 200 and body["text"].startswith("1 request is waiting for you")
        told = await h.wait_told(key)
        link = f"https://fake.slack.test/archives/{CHANNEL}/p{card.message_ref.replace('.', '')}"
        assert f"<{link}|Refund &lt;b&gt;P-1&lt;/b&gt;>" in told
        (response,) = [r for r in h.slack.responses if r.key == key]
        assert response.body["response_type"] == "ephemeral"

        # dave is not an approver of it: nothing for him.
        status, body, _ = await h.command(USERS["dave"], "pending")
        assert body["text"] == "Nothing is waiting for your decision."


async def test_gate_changes_need_an_admin_and_are_audited(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        # Not an admin: refused, nothing stored.
        status, body, _ = await h.command(USERS["bob"], "gate threshold 0.5")
        assert status == 200 and body.get("response_type") != "in_channel"
        assert "Only an admin can change" in body["text"]
        assert await overrides(h) == []
        # Reading is open to anyone known to Signoff, and only the reader sees it.
        status, body, _ = await h.command(USERS["bob"], "gate status")
        assert status == 200 and body.get("response_type") != "in_channel"
        assert "Confidence gate: OFF" in body["text"], body

        # Bad arguments: a usage line, ephemeral, nothing stored.
        for bad in (
            "gate threshold 1.5",
            "gate samples many",
            "gate estimator magic",
            "gate threshold 0.5 node=approval",
            "gate calibrate maybe",
        ):
            status, body, _ = await h.command(USERS["alice"], bad)
            assert "Usage:" in body["text"], bad
            assert body.get("response_type") != "in_channel"
        assert await overrides(h) == []

        # The admin's changes: stored, audited (who, old, new), confirmed in channel.
        changes = [
            ("gate on", ("global", "", "enabled", True)),
            ("gate threshold 0.6 agent=billing-bot", ("agent", "billing-bot", "threshold", 0.6)),
            ("gate threshold 0.7 node=connector", ("node_type", "connector", "threshold", 0.7)),
            ("gate estimator verbalization", ("global", "", "estimator", "verbalization")),
            ("gate samples 7", ("global", "", "samples", 7)),
            ("gate calibrate on", ("global", "", "calibrate", True)),
        ]
        for text, stored in changes:
            status, body, _ = await h.command(USERS["alice"], text)
            assert status == 200 and body["response_type"] == "in_channel", (text, body)
            assert "by alice" in body["text"]
            assert stored in await overrides(h)
        audit = await h.engine.store.audit_log()
        gate_entries = [a for a in audit if a["actor"] == "alice"]
        assert len(gate_entries) == len(changes)
        assert all("new" in a and "old" in a for a in gate_entries)

        status, body, _ = await h.command(USERS["alice"], "gate threshold 0.65")
        assert "previous override: none" in body["text"]
        status, body, _ = await h.command(USERS["alice"], "gate threshold 0.8")
        assert "previous override: 0.65" in body["text"]

        status, body, _ = await h.command(USERS["alice"], "gate status")
        assert body.get("response_type") != "in_channel"
        assert "Confidence gate: ON" in body["text"]
        effective = await h.engine.gate.settings.effective(None, None, fresh=True)
        assert effective.threshold == 0.8 and effective.samples == 7
        assert Scope.AGENT.value == "agent"


async def test_events_url_verification_and_mentions(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        challenge = json.dumps({"type": "url_verification", "token": "t", "challenge": "c-42"})
        status, body = await h.send(challenge, {**signed_headers(challenge), **JSON})
        assert status == 200 and "c-42" in body

        event = json.dumps(
            {
                "type": "event_callback",
                "team_id": "T0SIGNOFF",
                "api_app_id": "A0SIGNOFF",
                "event_id": "Ev01",
                "event_time": 1,
                "event": {
                    "type": "app_mention",
                    "user": USERS["bob"],
                    "text": "<@U0SIGNOFF> help?",
                    "channel": CHANNEL,
                    "ts": "1700000001.000200",
                },
            }
        )
        status, _ = await h.send(event, {**signed_headers(event), **JSON})
        assert status == 200

        async def answered() -> list:
            return h.slack.posted(CHANNEL)

        (reply,) = await wait_for(answered)
        assert reply.thread_ts == "1700000001.000200" and "/signoff help" in reply.text


async def test_without_slack_configured_there_is_no_endpoint(migrated_db_url: str) -> None:
    async with running_api(migrated_db_url, FLOWS.replace(f"slack:{CHANNEL}", "web")) as api:
        assert "slack" not in api.engine.dispatcher.sinks
        status, _ = await api.call("POST", "/slack/events")
        assert status in (404, 405)


BOB_ADMIN = PEOPLE.replace("admins: [alice]", "admins: [bob]")


async def test_the_person_admins_lists_is_admin_in_slack_and_through_their_token(
    migrated_db_url: str,
) -> None:
    """Issue 31's case: with ``admins: [bob]``, bob's approver token changes the gate as his
    Slack identity does; alice, listed no more, is refused both ways, told what is the case."""
    assert BOB_ADMIN != PEOPLE
    async with running_slack(migrated_db_url, FLOWS, people=BOB_ADMIN) as h:
        await h.api.token("bob", Role.APPROVER, "bob")
        status, body, _ = await h.command(USERS["bob"], "gate threshold 0.5")
        assert status == 200 and "Gate threshold set to 0.5 by bob" in body["text"], body
        status, body = await h.api.call("PATCH", "/v1/gate", as_="bob", json={"samples": 3})
        assert status == 200, body

        status, body, _ = await h.command(USERS["alice"], "gate threshold 0.9")
        assert "Only an admin can change" in body["text"]
        status, body = await h.api.call("PATCH", "/v1/gate", as_="admin", json={"samples": 7})
        assert status == 403, body
        assert body["message"] == (
            "this needs the admin role; alice's token is an admin token, but alice is not "
            "listed in admins:"
        )
        assert sorted(await overrides(h)) == [
            ("global", "", "samples", 3),
            ("global", "", "threshold", 0.5),
        ]
