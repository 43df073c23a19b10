"""A signed Slack request acts once (issue 29, item 5): the same bytes sent again within the
signature's 5 minutes are acknowledged with an empty 200 and do nothing, whichever server of
the database gets them, and however long after a restart.

Each case keeps the first request's body and headers and sends them again unchanged: that is
all a replay is (the signature covers the timestamp and the body, so nothing else would pass).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import text

from bot.slack.once import UNRECORDED
from engine.domain.model import JournalEvent, RunStatus, TakeoverStatus
from tests.integration.slack.harness import (
    CHANNEL,
    TEAM,
    USERS,
    SlackHarness,
    running_slack,
    signed_headers,
)
from tests.integration.slack.test_slack_clicks import FLOWS, pending_request
from tests.integration.slack.test_slack_events import mention
from tests.support.engines import wait_for, wait_status
from tests.support.waiting import quiet

JSON = {"Content-Type": "application/json"}


def command_body(h: SlackHarness, user: str, text: str) -> str:
    return urlencode(
        {
            "team_id": TEAM,
            "channel_id": CHANNEL,
            "user_id": user,
            "command": "/signoff",
            "text": text,
            "api_app_id": "A0SIGNOFF",
            "response_url": h.slack.response_url("replayed"),
            "trigger_id": h.slack.trigger(),
        }
    )


def deny_body(h: SlackHarness, user: str, request_id: str, reason: str) -> str:
    payload = {
        "type": "view_submission",
        "team": {"id": TEAM, "domain": "signoff-test"},
        "user": {"id": user, "team_id": TEAM},
        "api_app_id": "A0SIGNOFF",
        "trigger_id": h.slack.trigger(),
        "view": {
            "id": "V0DENY",
            "hash": "1700000000.abcdef",
            "type": "modal",
            "callback_id": "signoff_deny_reason",
            "private_metadata": request_id,
            "state": {
                "values": {"reason": {"reason": {"type": "plain_text_input", "value": reason}}}
            },
        },
    }
    return urlencode({"payload": json.dumps(payload)})


async def gate_audit(h: SlackHarness) -> list[tuple[str, Any, Any]]:
    entries = await h.engine.store.audit_log()
    return [(a["target"], a["old"], a["new"]) for a in reversed(entries)]


async def gate_enabled(h: SlackHarness) -> bool:
    settings = await h.engine.gate.settings.effective(None, None, fresh=True)
    return bool(settings.enabled)


async def test_a_replayed_gate_command_changes_the_gate_once(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        assert (await h.command(USERS["alice"], "gate on"))[0] == 200
        off = command_body(h, USERS["alice"], "gate off")
        signed = signed_headers(off)
        status, text = await h.send(off, signed)
        assert status == 200 and "set to off by alice" in json.loads(text)["text"]
        assert (await h.command(USERS["alice"], "gate on"))[0] == 200  # alice changes her mind

        status, text = await h.send(off, signed)  # the same bytes, seconds later

        assert (status, text) == (200, "")
        assert await gate_enabled(h)
        assert await gate_audit(h) == [
            ("gate.enabled", None, True),
            ("gate.enabled", True, False),
            ("gate.enabled", False, True),
        ]


async def test_a_replayed_deny_submission_decides_once(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await wait_status(h.engine, run_id, RunStatus.WAITING)
        body = deny_body(h, USERS["bob"], request_id, "not this one")
        signed = signed_headers(body)
        assert await h.send(body, signed) == (200, "")
        journal = await h.engine.store.journal(run_id)

        # Acknowledged as the first was (the modal closes): no "already denied" error shown,
        # nothing decided or journaled again.
        assert await h.send(body, signed) == (200, "")

        denied = await h.engine.store.get_takeover(request_id)
        assert denied.status == TakeoverStatus.DENIED and denied.decided_by == "bob"
        after = await h.engine.store.journal(run_id)
        assert [e.event for e in after].count(JournalEvent.TAKEOVER_DENIED) == 1
        assert after[: len(journal)] == journal


async def test_a_replayed_feedback_click_records_once_and_tells_once(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await h.click(USERS["bob"], "signoff_grant", request_id)
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        body, key = h.action_body(USERS["carol"], "signoff_feedback_up", f"{run_id}:refund")
        signed = signed_headers(body)
        assert (await h.send(body, signed))[0] == 200
        assert "recorded" in await h.wait_told(key)

        assert await h.send(body, signed) == (200, "")

        await quiet(0.2)  # a reply to the replay, had one been started, has arrived
        assert len(h.told(key)) == 1
        journal = await h.engine.store.journal(run_id)
        assert [e.event for e in journal].count(JournalEvent.FEEDBACK_RECORDED) == 1


async def test_a_replayed_button_changes_nothing(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await wait_status(h.engine, run_id, RunStatus.WAITING)
        body, key = h.action_body(USERS["bob"], "signoff_grant", request_id)
        signed = signed_headers(body)
        assert (await h.send(body, signed))[0] == 200
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        journal = await h.engine.store.journal(run_id)

        assert await h.send(body, signed) == (200, "")

        assert await h.engine.store.journal(run_id) == journal
        assert (await h.engine.store.get_takeover(request_id)).status == TakeoverStatus.RELEASED
        await quiet(0.2)
        assert h.told(key) == []  # the winner is told nothing, the first time or the second


async def test_a_replayed_mention_on_another_server_is_not_answered_again(
    migrated_db_url: str,
) -> None:
    """Two apps on one database, each with its own Slack: what one of them answered, the
    other does not answer again (before, each process remembered only its own events)."""
    event = mention("Ev0REPLAY")
    signed = {**signed_headers(event), **JSON}
    async with running_slack(migrated_db_url, FLOWS) as first:
        assert (await first.send(event, signed))[0] == 200

        async def answered() -> list:
            return first.slack.posted(CHANNEL)

        (reply,) = await wait_for(answered)
        assert "/signoff help" in reply.text
        async with running_slack(migrated_db_url, FLOWS, tokens=False) as second:
            assert await second.send(event, signed) == (200, "")
            assert await first.send(event, signed) == (200, "")
            await quiet(0.3)  # the follow-ups, had any been started, are done
            assert second.slack.posted() == [] and second.slack.calls == []
        assert len(first.slack.posted(CHANNEL)) == 1


async def test_when_the_database_cannot_record_a_request_nothing_acts(
    migrated_db_url: str,
) -> None:
    """Acting without a record would let the same bytes act again: a command is told so and
    changes nothing; an event gets a 503, which Slack retries."""
    async with running_slack(migrated_db_url, FLOWS) as h:
        assert (await h.command(USERS["alice"], "gate on"))[0] == 200

        def drop(conn: Any) -> None:
            conn.execute(text("DROP TABLE seen_requests"))

        await h.engine.db.transact(drop)

        status, body, _ = await h.command(USERS["alice"], "gate off")
        assert status == 200
        assert body == {"response_type": "ephemeral", "text": UNRECORDED}
        assert await gate_enabled(h)
        assert await gate_audit(h) == [("gate.enabled", None, True)]
        event = mention("Ev0NORECORD")
        status, text_ = await h.send(event, {**signed_headers(event), **JSON})
        assert status == 503 and json.loads(text_)["error"] == "unavailable"
        await quiet(0.3)
        assert h.slack.posted(CHANNEL) == []
