"""Events API requests: retries of one event make one reply, and a malformed timestamp is a 401.

Slack retries an event it got no quick answer to up to three times (``X-Slack-Retry-Num`` 1-3,
the same ``event_id``). The database remembers the event ids acted on (``bot/slack/once.py``);
a retry that reaches the listener all the same (its first delivery was never recorded) finds
the reply already in the thread (its message metadata) and posts nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter

import pytest

from tests.integration.slack.harness import (
    CHANNEL,
    SECRET,
    USERS,
    running_slack,
    signature,
    signed_headers,
)
from tests.integration.slack.test_slack_commands import FLOWS, JSON
from tests.support.engines import wait_for
from tests.support.waiting import quiet


def mention(event_id: str, ts: str = "1700000001.000200") -> str:
    return json.dumps(
        {
            "type": "event_callback",
            "team_id": "T0SIGNOFF",
            "api_app_id": "A0SIGNOFF",
            "event_id": event_id,
            "event_time": 1,
            "event": {
                "type": "app_mention",
                "user": USERS["bob"],
                "text": "<@U0SIGNOFF> help?",
                "channel": CHANNEL,
                "ts": ts,
            },
        }
    )


async def test_retries_of_an_event_make_one_reply(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        event = mention("Ev0RETRY")
        for retry in (None, "1", "2", "3"):
            headers = {**signed_headers(event), **JSON}
            if retry is not None:
                headers |= {"X-Slack-Retry-Num": retry, "X-Slack-Retry-Reason": "http_timeout"}
            status, _ = await h.send(event, headers)
            assert status == 200

        async def answered() -> list:
            return h.slack.posted(CHANNEL)

        await wait_for(answered)
        await quiet(0.3)  # the retries' follow-ups, had any been started, are done
        assert len(h.slack.posted(CHANNEL)) == 1

        # A retry of an event nobody recorded is answered once: from the database, without
        # reading the thread (Slack allows one history read a minute).
        other = mention("Ev0OTHER")
        headers = {**signed_headers(other), **JSON, "X-Slack-Retry-Num": "1"}
        assert (await h.send(other, headers))[0] == 200
        assert (await h.send(other, headers))[0] == 200

        async def both() -> bool:
            return len(h.slack.posted(CHANNEL)) >= 2

        await wait_for(both)
        await quiet(0.3)
        assert len(h.slack.posted(CHANNEL)) == 2
        assert h.slack.history_reads() == []


async def test_a_timestamp_that_is_not_a_number_is_refused_401(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        event = mention("Ev0STAMP")
        for stamp in ("abc", "", "1e9", " 1700000000", "1_700_000_000", "-5"):
            headers = {
                **JSON,
                "X-Slack-Request-Timestamp": stamp,
                "X-Slack-Signature": signature(event, stamp, SECRET),
            }
            status, body = await h.send(event, headers)
            assert status == 401, (stamp, status, body)
        assert h.slack.calls == []


async def test_startup_logs_no_bolt_token_warning(
    migrated_db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """bolt reads SLACK_BOT_TOKEN from the environment by itself (a deployment sets it for
    ``botToken: ${SLACK_BOT_TOKEN}``) and then warned that the client it was given wins."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-the-environment")
    caplog.set_level(logging.DEBUG)
    async with running_slack(migrated_db_url, FLOWS) as h:
        assert "slack" in h.engine.dispatcher.sinks
    unused = [r.getMessage() for r in caplog.records if "will be unused" in r.getMessage()]
    assert unused == []


async def test_an_event_and_its_retry_at_once_on_two_replicas_make_one_reply(
    migrated_db_url: str,
) -> None:
    """Two apps on one database (two replicas behind a load balancer) get the same
    ``event_id`` at the same moment: the first delivery on one, Slack's retry on the other.
    The database's insert-if-absent of the event id lets exactly one of them act."""
    rounds = 20
    async with (
        running_slack(migrated_db_url, FLOWS) as first,
        running_slack(migrated_db_url, FLOWS, tokens=False) as second,
    ):
        for n in range(rounds):
            event = mention(f"Ev0TWIN{n:04d}", ts=f"1700000100.{n:06d}")
            retry = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
            answers = await asyncio.gather(
                first.send(event, {**signed_headers(event), **JSON}),
                second.send(event, {**signed_headers(event), **JSON, **retry}),
            )
            assert [status for status, _ in answers] == [200, 200]

        def replies() -> list:
            return first.slack.posted(CHANNEL) + second.slack.posted(CHANNEL)

        async def all_answered() -> bool:
            return len({m.thread_ts for m in replies()}) == rounds

        await wait_for(all_answered)
        await quiet(0.5)  # a second reply, had one been started, has reached its fake
        per_thread = Counter(m.thread_ts for m in replies())
        assert per_thread == dict.fromkeys(per_thread, 1) and len(per_thread) == rounds
