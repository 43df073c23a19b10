"""One real ``signoff serve`` process on SQLite for the fuzzing tests, driven with plain
``urllib`` so that hypothesis and schemathesis can call it from synchronous tests.

    with serve(tmp_path, config_body()) as target:   # migrated, tokens, a parked run
        status = target.send("POST", "/v1/runs", body, headers)
        before = target.state()      # row counts of every table a request could change
        target.assert_quiet()        # no traceback in the server's log since the last look

Leaving the block kills the server and fails when its log holds a traceback. ``on_a_thread``
runs an async fake service (the Bot Connector) beside such synchronous tests.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.integration.slack.harness import SECRET
from tests.integration.teams.teamsharness import aad
from tests.reliability.cluster import size
from tests.support.process import ROOT, child_env, free_port
from tests.support.waiting import quiet_sync

T = TypeVar("T")

# Hypothesis examples per fuzzing test: CI and everyday runs, and ``make reliability``.
EXAMPLES = size(ci=150, full=10_000)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# The server's own outbound HTTP goes through a proxy that is not there, unless it is to
# loopback: a call the tests did not mean to leave the machine fails at once, and is not even
# resolved (the Bot Framework SDK, for one, asks login.microsoftonline.com for a token before
# it replies to an authenticated activity).
NO_WAY_OUT = {
    name: value
    for key, value in (
        ("http_proxy", "http://127.0.0.1:9"),
        ("https_proxy", "http://127.0.0.1:9"),
        ("no_proxy", "127.0.0.1,localhost"),
    )
    for name in (key, key.upper())
}
STATE_TABLES = (
    "runs",
    "journal",
    "takeover_requests",
    "takeover_votes",
    "ledger",
    "outbox",
    "audit_log",
    "api_tokens",
    "workflows",
    "gate_overrides",
    "chat_conversations",
    "chat_threads",
    "chat_messages",
)
# bob approves; alice is the admin (not an approver, but an admin may decide any request: an
# admin override); mallory is known and may decide nothing.
PEOPLE = {"alice": "U0ALICE01", "bob": "U0BOB0001", "mallory": "U0MALLORY"}
APPROVERS = ("bob",)
DECIDERS = (*APPROVERS, "alice")  # who may decide the pending request
WORKFLOWS = """\
workflows:
  pay:
    nodes:
      - {id: approve, type: approval, approvers: [bob], channels: [web], timeoutMinutes: 1440}
      - {id: act, type: connector, connector: demo-ledger, action: refund,
         args: {order: "{{ input.order }}"}}
"""


def config_body(teams: str = "") -> str:
    """``app.yaml`` after its ``database:`` and ``server:`` lines; ``teams`` is a ``teams:``
    line (none: the Teams endpoint is not mounted)."""
    people = "".join(
        f"  {name}: {{email: {name}@example.com, slack: {slack}, teams: {aad(name)}}}\n"
        for name, slack in PEOPLE.items()
    )
    return (
        f"people:\n{people}admins: [alice]\n"
        f"slack: {{botToken: xoxb-fake, signingSecret: '{SECRET}', "
        "apiBaseUrl: 'http://127.0.0.1:9/api/'}\n" + teams + WORKFLOWS
    )


@dataclass
class Target:
    """The server under test, its database and log, API tokens by name (``agent``, ``admin``,
    ``approver``), and a run parked on ``request_id``."""

    base: str
    db: Path
    log: Path
    tokens: dict[str, str]
    openapi: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    request_id: str = ""
    statuses: Counter[int] = field(default_factory=Counter)
    _log_seen: int = 0

    def send(self, method: str, path: str, data: bytes | None, headers: dict[str, str]) -> int:
        """One request; returns the status and counts it in ``statuses``."""
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status = int(resp.status)
        except urllib.error.HTTPError as exc:
            status = exc.code
        self.statuses[status] += 1
        return status

    def call(self, method: str, path: str, token: str | None, body: Any = None) -> Any:
        """A JSON call that must succeed; returns the decoded answer."""
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def state(self) -> dict[str, int]:
        """Row counts of ``STATE_TABLES``, and how many takeover requests are decided."""
        conn = sqlite3.connect(self.db)
        try:
            return {
                name: conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
                for name in STATE_TABLES
            } | {
                "decided": conn.execute(
                    "SELECT count(*) FROM takeover_requests WHERE status != 'pending'"
                ).fetchone()[0]
            }
        finally:
            conn.close()

    def assert_quiet(self) -> None:
        """No traceback in the server's log since the last call."""
        with self.log.open("rb") as log:
            log.seek(self._log_seen)
            fresh = log.read().decode(errors="replace")
        self._log_seen += len(fresh.encode(errors="replace"))
        assert_no_traceback(fresh)


def assert_no_traceback(text: str) -> None:
    """Every traceback in a server log is a failure."""
    unexpected = text.split("Traceback")[1:]
    assert not unexpected and "Error handling request" not in text, unexpected[:3]


def _cli(config: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", *args, "--config", str(config)],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(300):  # bounded: 30 s
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        assert proc.poll() is None, log.read_text()
        quiet_sync(0.1)  # the process is still starting: real time
    raise AssertionError("server did not start:\n" + log.read_text())


def _park_a_run(target: Target) -> None:
    """Start a ``pay`` run and wait until it waits for bob on ``target.request_id``."""
    run = target.call(
        "POST", "/v1/runs", target.tokens["agent"], {"workflow": "pay", "input": {"order": "o-1"}}
    )
    target.run_id = run["id"]
    for _ in range(100):  # bounded: 10 s
        found = target.call("GET", f"/v1/runs/{run['id']}/takeover", target.tokens["agent"])
        if found["requests"]:
            target.request_id = found["requests"][0]["id"]
            return
        quiet_sync(0.1)  # the served process works meanwhile
    raise AssertionError("the run did not park")


@contextmanager
def serve(tmp: Path, body: str) -> Iterator[Target]:
    """Migrate a fresh SQLite file, make one token per role, start ``signoff serve`` with
    ``body`` as its configuration, and park one run."""
    port = free_port()
    db = tmp / "signoff.db"
    config = tmp / "app.yaml"
    config.write_text(
        f"database: {{url: 'sqlite+aiosqlite:///{db}'}}\n"
        f"server: {{host: 127.0.0.1, port: {port}, pollSeconds: 0.2}}\n" + body
    )
    _cli(config, "migrate")
    tokens = {}
    for name, role, person in (
        ("agent", "agent", None),
        ("admin", "admin", "alice"),
        ("approver", "approver", "bob"),
    ):
        extra = ["--person", person] if person else []
        out = _cli(config, "token", "create", "--role", role, "--name", name, *extra)
        tokens[name] = out.strip().splitlines()[-1]
    log = tmp / "server.log"
    base = f"http://127.0.0.1:{port}"
    with running(config, base, log):
        target = Target(base, db, log, tokens)
        target.openapi = target.call("GET", "/openapi.json", None)
        _park_a_run(target)
        yield target


@contextmanager
def running(config: Path, base: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``signoff serve --config config`` for the block, ready on ``base``, its output appended
    to ``log``; killed after, and its log may hold no traceback."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--config", str(config)],
            cwd=ROOT,
            env=child_env(**NO_WAY_OUT),
            stdout=out,
            stderr=out,
        )
    try:
        _wait_ready(base, proc, log)
        yield proc
    finally:
        proc.kill()
        proc.wait(10)
    assert_no_traceback(log.read_text())


@contextmanager
def on_a_thread(
    make: Callable[[], AbstractAsyncContextManager[T]],
) -> Iterator[T]:
    """Enter the async context manager ``make()`` on an event loop of its own thread (a fake
    service the synchronous tests call through the server under test)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    manager = make()

    async def enter() -> T:
        return await manager.__aenter__()

    async def leave() -> None:
        await manager.__aexit__(None, None, None)

    try:
        value = asyncio.run_coroutine_threadsafe(enter(), loop).result(30)
        try:
            yield value
        finally:
            asyncio.run_coroutine_threadsafe(leave(), loop).result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=10,
)
