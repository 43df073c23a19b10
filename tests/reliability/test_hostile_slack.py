"""Hostile Slack requests against a real ``signoff serve`` (issue 29): signed requests sent
again, byte for byte, within the signature's 5 minutes.

A replay is what someone who saw a request (a proxy's log, a shared trace) can do without the
signing secret: send the same body with the same ``X-Slack-Request-Timestamp`` and
``X-Slack-Signature``. Each one is acknowledged with an empty 200 (Slack must not retry it) and
changes nothing: no gate change, no audit row, no decision, no journal event; ``/healthz``
answers within 1 s throughout (``watching``; ``-s`` prints the worst round trip).
"""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.integration.slack.harness import signed_headers
from tests.reliability.hostile import (  # latency_report: the module's worst /healthz, printed
    latency_report,  # noqa: F401
    send,
    watching,
)
from tests.reliability.served import PEOPLE, Target, config_body, serve
from tests.support.waiting import quiet_sync

REPLAYS = 20  # of each request, sent at once


@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """Slack configured (its Web API unreachable: these cases need only the acknowledgement)."""
    with serve(tmp_path_factory.mktemp("hostile_slack"), config_body()) as target:
        yield target


def command(user: str, text: str) -> str:
    return urllib.parse.urlencode(
        {
            "team_id": "T0SIGNOFF",
            "channel_id": "C0APPROVALS",
            "user_id": PEOPLE[user],
            "command": "/signoff",
            "text": text,
            "api_app_id": "A0SIGNOFF",
            "response_url": "http://127.0.0.1:9/response",
            "trigger_id": "1.2.3",
        }
    )


def deny_submission(user: str, request_id: str) -> str:
    payload = {
        "type": "view_submission",
        "team": {"id": "T0SIGNOFF", "domain": "signoff-test"},
        "user": {"id": PEOPLE[user], "team_id": "T0SIGNOFF"},
        "api_app_id": "A0SIGNOFF",
        "trigger_id": "1.2.4",
        "view": {
            "id": "V0DENY",
            "hash": "1700000000.abcdef",
            "type": "modal",
            "callback_id": "signoff_deny_reason",
            "private_metadata": request_id,
            "state": {
                "values": {"reason": {"reason": {"type": "plain_text_input", "value": "no"}}}
            },
        },
    }
    return urllib.parse.urlencode({"payload": json.dumps(payload)})


def post(target: Target, body: str, headers: dict[str, str]) -> tuple[int, bytes]:
    status, _, answer = send(target, "POST", "/slack/events", body.encode(), None, headers)
    return status, answer


def replay(target: Target, body: str, headers: dict[str, str]) -> list[tuple[int, bytes]]:
    """The same bytes ``REPLAYS`` times at once."""
    with ThreadPoolExecutor(REPLAYS) as pool:
        return list(pool.map(lambda _: post(target, body, headers), range(REPLAYS)))


def rows(target: Target, query: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(target.db)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def settled(target: Target, run_id: str) -> str:
    """The run's status once it has ended (bounded: 10 s)."""
    for _ in range(100):
        run = target.call("GET", f"/v1/runs/{run_id}", target.tokens["agent"])
        if run["status"] in ("completed", "failed", "cancelled"):
            return str(run["status"])
        quiet_sync(0.1)  # the served process works meanwhile
    raise AssertionError(f"run {run_id} did not settle")


def gate_audit(target: Target) -> list[tuple[Any, ...]]:
    return rows(target, "SELECT actor, target, old, new FROM audit_log ORDER BY id")


def test_a_replayed_gate_off_changes_the_gate_once(slack: Target) -> None:
    off = command("alice", "gate off")
    signed = signed_headers(off)
    status, answer = post(slack, off, signed)
    assert status == 200 and "set to off by alice" in json.loads(answer)["text"]
    on = command("alice", "gate on")
    assert "set to on by alice" in json.loads(post(slack, on, signed_headers(on))[1])["text"]
    audit = gate_audit(slack)
    assert [a[3] for a in audit] == ["false", "true"]

    with watching("replayed gate off, 20 at once", slack):  # and no row count changes
        answers = replay(slack, off, signed)

    assert answers == [(200, b"")] * REPLAYS
    assert gate_audit(slack) == audit  # no second "off" by alice
    assert rows(slack, "SELECT value FROM gate_overrides WHERE setting = 'enabled'") == [("true",)]


def test_a_replayed_deny_submission_decides_once(slack: Target) -> None:
    deny = deny_submission("bob", slack.request_id)
    signed = signed_headers(deny)
    assert post(slack, deny, signed) == (200, b"")
    decided = "SELECT status, decided_by FROM takeover_requests WHERE id = ?"
    query = decided.replace("?", f"'{slack.request_id}'")
    assert rows(slack, query) == [("denied", "bob")]
    assert settled(slack, slack.run_id) == "failed"  # denied, no deny path: journal complete
    journal = rows(slack, f"SELECT seq, event FROM journal WHERE run_id = '{slack.run_id}'")

    with watching("replayed deny submission, 20 at once", slack):
        answers = replay(slack, deny, signed)

    assert answers == [(200, b"")] * REPLAYS
    assert rows(slack, query) == [("denied", "bob")]
    after = rows(slack, f"SELECT seq, event FROM journal WHERE run_id = '{slack.run_id}'")
    assert after == journal
