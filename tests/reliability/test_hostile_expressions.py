"""Hostile expressions against a real ``signoff serve`` (issue 29, items 3 and 14): one filter
call that does unbounded work in a single C or Python call (``wordwrap`` of a megabyte word,
``tojson`` indented by a million), a ``{{ a.b }}`` path longer than jinja may compile, and a run
resumed after its server died with such a step ahead of it.

A workflow stored through ``POST /v1/workflows`` whose text shows the problem is refused there
(422, ``expression limit``); the same call with its sizes taken from the run's input is stored,
and its step fails with ``expression limit: ...`` within a second. ``/healthz`` answers within
1 s throughout (``watching``; ``-s`` prints the worst round trip).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.services import crashpoints
from tests.reliability.hostile import (  # latency_report: the module's worst /healthz, printed
    assert_refused,
    latency_report,  # noqa: F401
    send,
    watching,
)
from tests.reliability.served import (
    NO_WAY_OUT,
    WORKFLOWS,
    Target,
    _cli,
    _wait_ready,
    config_body,
    serve,
)
from tests.support.process import ROOT, child_env, free_port
from tests.support.waiting import quiet_sync

CONNECTOR = """\
connectors:
  demo-ledger:
    type: demo-ledger
    actions:
      refund: {kind: write}
      note: {kind: write}
"""
WRAP = "('a' * 1000000)|wordwrap(1, true, '')"
INDENT = "range(600)|list|tojson(indent=1000000)"
# The cases as written: constants the store can judge before anything runs.
WRITTEN = {
    "wordwrap of a megabyte word": {"text": "{{ " + WRAP + " }}"},
    "three such arguments": {name: "{{ " + WRAP + " }}" for name in ("a", "b", "c")},
    "tojson indented by a million": {"text": "{{ " + INDENT + " }}"},
    "a 300 KB path": {"text": "{{ input." + "a" * 300_000 + " }}"},
}
# The same calls with their sizes in the input: nothing to see until the step runs.
FROM_INPUT = {
    "wordwrap of a megabyte word": {"text": "{{ (input.c * input.n)|wordwrap(1, true, '') }}"},
    "three such arguments": {
        name: "{{ (input.c * input.n)|wordwrap(1, true, '') }}" for name in ("a", "b", "c")
    },
    "tojson indented by a million": {"text": "{{ range(600)|list|tojson(indent=input.n) }}"},
    "wordwrap of a megabyte input": {"text": "{{ input.s|wordwrap(1, true, '') }}"},
}
INPUT = {"c": "a", "n": 1_000_000, "s": "a" * 1_000_000}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    body = config_body().replace(WORKFLOWS, CONNECTOR + WORKFLOWS)
    with serve(tmp_path_factory.mktemp("expressions"), body) as target:
        yield target


def store(target: Target, name: str, args: dict[str, str]) -> tuple[int, bytes]:
    node = {"id": "act", "type": "connector", "connector": "demo-ledger", "action": "note"}
    workflow = {"name": name, "nodes": [{**node, "args": args}]}
    status, _, body = send(
        target, "POST", "/v1/workflows", json.dumps(workflow).encode(), "admin", timeout=5
    )
    return status, body


def finished(target: Target, run_id: str, seconds: float) -> dict[str, object]:
    """The run once it has failed or completed, polled for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        status, _, body = send(target, "GET", f"/v1/runs/{run_id}", timeout=5)
        assert status == 200, body
        found: dict[str, object] = json.loads(body)
        if found["status"] in ("failed", "completed") or time.monotonic() > deadline:
            return found
        quiet_sync(0.05)  # the served process works meanwhile


def assert_failed_at_the_limit(target: Target, run_id: str, seconds: float) -> None:
    found = finished(target, run_id, seconds)
    assert found["status"] == "failed", found
    assert str(found["error"]).startswith("expression limit: "), found
    _, _, journal = send(target, "GET", f"/v1/runs/{run_id}/journal", timeout=5)
    assert b"expression limit: " in journal, journal[:500]


@pytest.mark.parametrize("case", sorted(WRITTEN))
def test_what_the_text_shows_is_refused_when_stored(served: Target, case: str) -> None:
    """Refused with the node's path, nothing stored (``watching`` compares the row counts)."""
    with watching(f"stored: {case}", served):
        status, body = store(served, "written-" + case.replace(" ", "-"), WRITTEN[case])
        error = assert_refused(status, body, 422)
        assert "expression limit: " in error["message"], error
        assert "nodes[0].args." in error["message"], error


@pytest.mark.parametrize("case", sorted(FROM_INPUT))
def test_one_call_past_the_limits_fails_its_step_at_once(served: Target, case: str) -> None:
    """Before the fix: ``wordwrap`` ran 13 s per argument and the step completed; ``tojson``
    built 600 MB. Now each fails in well under a second, the server answering throughout."""
    name = "input-" + case.replace(" ", "-")
    with watching(f"run: {case}", served, same_state=False):
        status, body = store(served, name, FROM_INPUT[case])
        assert status == 201, body
        raw = json.dumps({"workflow": name, "input": INPUT}).encode()
        started = time.monotonic()
        status, _, body = send(served, "POST", "/v1/runs", raw, timeout=5)
        assert status == 201, body
        assert_failed_at_the_limit(served, json.loads(body)["id"], seconds=5)
        # the worker polls every 0.2 s: the step's own evaluation is a few milliseconds
        assert time.monotonic() - started < 1.0


def _start(config: Path, log: Path, crash_dir: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--config", str(config)],
            cwd=ROOT,
            env=child_env(**NO_WAY_OUT, **{crashpoints.DIR_VAR: str(crash_dir)}),
            stdout=out,
            stderr=out,
        )


def test_a_run_resumed_after_a_crash_fails_its_step_again(tmp_path: Path) -> None:
    """The server dies (the ``ack`` crash point) with the run stored and its step not yet
    run; the next server takes the run up and fails the step with ``expression limit``,
    answering ``/healthz`` throughout. Before the fix, that step stalled the new server too."""
    port = free_port()
    db, config, log = tmp_path / "signoff.db", tmp_path / "app.yaml", tmp_path / "server.log"
    crash_dir = tmp_path / "crash-points"
    crash_dir.mkdir()
    config.write_text(
        f"database: {{url: 'sqlite+aiosqlite:///{db}'}}\n"
        f"server: {{host: 127.0.0.1, port: {port}, pollSeconds: 0.2, leaseSeconds: 5}}\n"
        + config_body().replace(WORKFLOWS, CONNECTOR + WORKFLOWS)
    )
    _cli(config, "migrate")
    tokens = {
        role: _cli(config, "token", "create", "--role", role, "--name", role, *extra)
        .strip()
        .splitlines()[-1]
        for role, extra in (("agent", []), ("admin", ["--person", "alice"]))
    }
    base = f"http://127.0.0.1:{port}"
    target = Target(base, db, log, tokens)
    proc = _start(config, log, crash_dir)
    try:
        _wait_ready(base, proc, log)
        status, body = store(target, "resumed", FROM_INPUT["three such arguments"])
        assert status == 201, body
        (crash_dir / "ack").touch()  # the next committed POST kills the server before it answers
        raw = json.dumps({"workflow": "resumed", "input": INPUT}).encode()
        with pytest.raises(OSError):
            send(target, "POST", "/v1/runs", raw, timeout=5)
        assert proc.wait(10) == -signal.SIGKILL
        with sqlite3.connect(db) as conn:
            ((run_id, left),) = conn.execute(
                "SELECT id, status FROM runs WHERE workflow = ?", ("resumed",)
            )
        assert left not in ("failed", "completed"), left  # the step had not run: resumed below
        proc = _start(config, log, crash_dir)
        _wait_ready(base, proc, log)
        with watching("resumed after a crash", target, same_state=False):
            assert_failed_at_the_limit(target, run_id, seconds=15)  # within the 5 s lease
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
