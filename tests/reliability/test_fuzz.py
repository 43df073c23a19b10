"""Fuzzing a real ``signoff serve`` (SQLite): hypothesis-generated REST bodies for every
documented POST/PATCH endpoint (with a valid token, a wrong-role token and none), and Slack
payloads (signed and unsigned). Expected: zero 5xx, zero unhandled exceptions in the server's
log, and zero state changes from unsigned or unauthorized requests.

Examples per target: a few hundred in CI, 10,000 under ``SIGNOFF_RELIABILITY_FULL=1``. The
server is ``served.serve``'s, through the ``target`` fixture (conftest.py).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from hypothesis import given
from hypothesis import strategies as st

from tests.integration.slack.harness import signed_headers
from tests.reliability.served import FUZZ, Target, json_values


def operations(openapi: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted(
        (method.upper(), path)
        for path, ops in openapi["paths"].items()
        for method in ops
        if method in ("post", "patch", "put", "delete")
    )


KNOWN_KEYS = [
    "workflow",
    "input",
    "idempotencyKey",
    "agent",
    "reason",
    "stepId",
    "notes",
    "release",
    "sdpOffer",
    "sdpAnswer",
    "timeoutMinutes",
    "channels",
    "approvers",
    "value",
    "scope",
    "setting",
    "action",
    "args",
    "executionId",
]
bodies = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(KNOWN_KEYS), json_values, max_size=6),
    st.binary(max_size=200),
)


def fill(path: str, target: Target, junk: str) -> str:
    return (
        path.replace("{id}", target.run_id if junk == "" else junk)
        .replace("{tkId}", target.request_id if junk == "" else junk)
        .replace("{executionId}", junk or "x")
        .replace("{name}", junk or "pay")
    )


@given(data=st.data())
@FUZZ
def test_rest_bodies_never_5xx(target: Target, data: st.DataObject) -> None:
    method, path = data.draw(st.sampled_from(operations(target.openapi)))
    junk = data.draw(st.sampled_from(["", "", "nope", "%2e%2e", "0" * 300]))
    who = data.draw(st.sampled_from(["agent", "admin", "approver", None, "bad"]))
    body = data.draw(bodies)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if who == "bad":
        headers["Authorization"] = "Bearer so_not-a-real-token"
    elif who is not None:
        headers["Authorization"] = f"Bearer {target.tokens[who]}"
    before = target.state() if who in (None, "bad") else None
    status = target.send(method, fill(path, target, junk), raw, headers)
    assert status < 500, (method, path, body, status)
    if before is not None:
        assert status in (401, 404, 405), (method, path, status)
        assert target.state() == before, (method, path, body)


slack_payloads = st.fixed_dictionaries(
    {"type": st.sampled_from(["block_actions", "view_submission", "shortcut", "x"]) | st.text()},
    optional={
        "user": st.fixed_dictionaries(
            {},
            optional={
                "id": st.sampled_from(["U0BOB0001", "U0ALICE01", "U0NOBODY"]) | st.text(max_size=12)
            },
        ),
        "actions": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "action_id": st.sampled_from(
                        ["signoff_grant", "signoff_deny", "signoff_takeover", "signoff_release"]
                    )
                    | st.text(max_size=20),
                    "value": st.text(max_size=40),
                },
            ),
            max_size=3,
        ),
        "view": json_values,
        "container": json_values,
        "response_url": st.just("http://127.0.0.1:9/response/1") | st.text(max_size=20),
    },
)


@given(payload=slack_payloads, command=st.booleans(), text=st.text(max_size=80))
@FUZZ
def test_unsigned_slack_payloads_are_refused_and_change_nothing(
    target: Target, payload: dict[str, Any], command: bool, text: str
) -> None:
    body = slack_body(target, payload, command, text)
    before = target.state()
    status = target.send(
        "POST", "/slack/events", body.encode(), signed_headers(body, secret="0" * 32)
    )  # a wrong signature
    assert status == 401, (payload, status)
    assert target.state() == before


@given(payload=slack_payloads, command=st.booleans(), text=st.text(max_size=80))
@FUZZ
def test_signed_slack_payloads_never_5xx(
    target: Target, payload: dict[str, Any], command: bool, text: str
) -> None:
    body = slack_body(target, payload, command, text)
    status = target.send("POST", "/slack/events", body.encode(), signed_headers(body))
    assert status < 500, (payload, status)


def slack_body(target: Target, payload: dict[str, Any], command: bool, text: str) -> str:
    # Clicks aim at the real request now and then, so a signed one may decide it.
    for action in payload.get("actions", []):
        if action.get("value") == "":
            action["value"] = target.request_id
    if command:
        return urlencode(
            {
                "command": "/signoff",
                "text": text,
                "user_id": "U0BOB0001",
                "channel_id": "C0FUZZ",
                "team_id": "T0FUZZ",
                "response_url": "http://127.0.0.1:9/response/2",
            }
        )
    return urlencode({"payload": json.dumps(payload)})
