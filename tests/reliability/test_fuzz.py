"""Fuzzing a real ``signoff serve`` (SQLite): hypothesis-generated REST bodies for every
documented POST/PATCH endpoint (with a valid token, a wrong-role token and none), and Slack
payloads (signed and unsigned). Expected: zero 5xx, zero unhandled exceptions in the server's
log, and zero state changes from unsigned or unauthorized requests.

Examples per target: a few hundred in CI, 10,000 under ``SIGNOFF_RELIABILITY_FULL=1``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.slack.harness import SECRET, signed_headers
from tests.reliability.cluster import size
from tests.support.process import ROOT, child_env, free_port

EXAMPLES = size(ci=150, full=10_000)
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
STATE_TABLES = ("runs", "journal", "takeover_requests", "takeover_votes", "ledger", "outbox",
                "audit_log", "api_tokens", "workflows", "gate_overrides")

CONFIG = f"""\
people:
  alice: {{email: alice@example.com, slack: U0ALICE01}}
  bob: {{email: bob@example.com, slack: U0BOB0001}}
admins: [alice]
slack: {{botToken: xoxb-fake, signingSecret: '{SECRET}', apiBaseUrl: 'http://127.0.0.1:9/api/'}}
workflows:
  pay:
    nodes:
      - {{id: approve, type: approval, approvers: [bob], channels: [web]}}
      - {{id: act, type: connector, connector: demo-ledger, action: refund,
         args: {{order: "{{{{ input.order }}}}"}}}}
"""


@dataclass
class Target:
    base: str
    db: Path
    log: Path
    tokens: dict[str, str]
    openapi: dict[str, Any]
    run_id: str
    request_id: str
    statuses: Counter[int] = field(default_factory=Counter)

    def send(self, method: str, path: str, data: bytes | None,
             headers: dict[str, str]) -> int:
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status = int(resp.status)
        except urllib.error.HTTPError as exc:
            status = exc.code
        self.statuses[status] += 1
        return status

    def state(self) -> dict[str, int]:
        import sqlite3

        conn = sqlite3.connect(self.db)
        try:
            return {
                name: conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
                for name in STATE_TABLES
            } | {"decided": conn.execute(
                "SELECT count(*) FROM takeover_requests WHERE status != 'pending'"
            ).fetchone()[0]}
        finally:
            conn.close()


def _cli(config: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", *args, "--config", str(config)],
        cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60, check=True,
    )
    return out.stdout


def _json(target: Target, method: str, path: str, token: str | None, body: Any = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(target.base + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    tmp = tmp_path_factory.mktemp("fuzz")
    port = free_port()
    db = tmp / "signoff.db"
    config = tmp / "app.yaml"
    config.write_text(
        f"database: {{url: 'sqlite+aiosqlite:///{db}'}}\n"
        f"server: {{host: 127.0.0.1, port: {port}, pollSeconds: 0.2}}\n" + CONFIG
    )
    _cli(config, "migrate")
    tokens = {}
    for name, role, person in (("agent", "agent", None), ("admin", "admin", "alice"),
                               ("approver", "approver", "bob")):
        extra = ["--person", person] if person else []
        out = _cli(config, "token", "create", "--role", role, "--name", name, *extra)
        tokens[name] = out.strip().splitlines()[-1]
    log = tmp / "server.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--config", str(config)],
            cwd=ROOT, env=child_env(), stdout=out, stderr=out,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):  # bounded: 30 s
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        target = Target(base, db, log, tokens, {}, "", "")
        target.openapi = _json(target, "GET", "/openapi.json", None)
        run = _json(target, "POST", "/v1/runs", tokens["agent"],
                    {"workflow": "pay", "input": {"order": "o-1"}})
        target.run_id = run["id"]
        for _ in range(100):  # bounded: 10 s
            found = _json(target, "GET", f"/v1/runs/{run['id']}/takeover", tokens["agent"])
            if found["requests"]:
                target.request_id = found["requests"][0]["id"]
                break
            time.sleep(0.1)
        assert target.request_id, "the run did not park"
        yield target
    finally:
        proc.kill()
        proc.wait(10)
    text = log.read_text()
    # Every traceback is a failure.
    unexpected = text.split("Traceback")[1:]
    assert not unexpected and "Error handling request" not in text, unexpected[:3]


def operations(openapi: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted(
        (method.upper(), path)
        for path, ops in openapi["paths"].items()
        for method in ops
        if method in ("post", "patch", "put", "delete")
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                               max_size=4),
    max_leaves=10,
)
KNOWN_KEYS = ["workflow", "input", "idempotencyKey", "agent", "reason", "stepId", "notes",
              "release", "sdpOffer", "sdpAnswer", "timeoutMinutes", "channels", "approvers",
              "value", "scope", "setting", "action", "args", "executionId"]
bodies = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(KNOWN_KEYS), json_values, max_size=6),
    st.binary(max_size=200),
)


def fill(path: str, target: Target, junk: str) -> str:
    return (path.replace("{id}", target.run_id if junk == "" else junk)
                .replace("{tkId}", target.request_id if junk == "" else junk)
                .replace("{executionId}", junk or "x")
                .replace("{name}", junk or "pay"))


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
        "user": st.fixed_dictionaries({}, optional={"id": st.sampled_from(
            ["U0BOB0001", "U0ALICE01", "U0NOBODY"]) | st.text(max_size=12)}),
        "actions": st.lists(st.fixed_dictionaries({}, optional={
            "action_id": st.sampled_from(["signoff_grant", "signoff_deny", "signoff_takeover",
                                          "signoff_release"]) | st.text(max_size=20),
            "value": st.text(max_size=40),
        }), max_size=3),
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
    status = target.send("POST", "/slack/events", body.encode(),
                         signed_headers(body, secret="0" * 32))  # a wrong signature
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
        return urlencode({"command": "/signoff", "text": text, "user_id": "U0BOB0001",
                          "channel_id": "C0FUZZ", "team_id": "T0FUZZ",
                          "response_url": "http://127.0.0.1:9/response/2"})
    return urlencode({"payload": json.dumps(payload)})
