"""Hostile tools against a real ``signoff serve`` (issue 29, item 1): an admin token stores a
workflow whose `tool` node names ``subprocess:getoutput``, ``os:system``, ``builtins:eval`` or
a module ``app.yaml`` does not declare. Each is a 422 naming the node's path and nothing is
stored; a declared tool that blocks its thread for 3 s fails its step by its time limit while
``/healthz`` keeps answering within 1 s (the harness's poller, printed with ``-s``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.reliability.hostile import (  # latency_report: the module's worst /healthz, printed
    assert_refused,
    latency_report,  # noqa: F401
    send,
    watching,
)
from tests.reliability.served import WORKFLOWS, Target, config_body, serve
from tests.support.waiting import quiet_sync

TOOLS = """\
tools:
  normalize: {function: "tests.support.tools:record"}
  slow: {function: "tests.support.tools:slow", timeoutSeconds: 0.5}
"""
SHELL = {
    "subprocess:getoutput": {"cmd": "id"},
    "os:system": {"command": "sleep 5"},
    "builtins:eval": {"source": "__import__('os').system('id')"},
    "tests.support.tools:spy": {},  # importable on the server, but not declared
    "myco.undeclared:run": {},
}


# The operator's own workflow may name any function; it too runs off the loop.
BLOCKING = """\
  blocking:
    nodes:
      - {id: t, type: tool, function: "tests.support.tools:block", args: {seconds: 3}}
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    body = config_body().replace(WORKFLOWS, TOOLS + WORKFLOWS + BLOCKING)
    with serve(tmp_path_factory.mktemp("tools"), body) as target:
        yield target


def store(target: Target, name: str, nodes: list[dict[str, Any]]) -> tuple[int, bytes]:
    raw = json.dumps({"name": name, "nodes": nodes}).encode()
    status, _, body = send(target, "POST", "/v1/workflows", raw, "admin", timeout=10)
    return status, body


@pytest.mark.parametrize("function", sorted(SHELL))
def test_a_stored_workflow_cannot_name_an_undeclared_function(
    function: str, served: Target
) -> None:
    note = {"id": "note", "type": "connector", "connector": "demo-ledger", "action": "note"}
    shell = {"id": "shell", "type": "tool", "function": function, "args": SHELL[function]}
    with watching(f"stored tool {function}", served):
        status, body = store(served, "pwn", [note, shell])
        error = assert_refused(status, body, 422)
        assert error["message"].startswith(f'nodes[1].function: "{function}" is not a tool')
        raw = json.dumps({"workflow": "pwn"}).encode()
        status, _, body = send(served, "POST", "/v1/runs", raw, timeout=10)
        assert_refused(status, body, 404)


def test_an_undeclared_tool_name_is_refused(served: Target) -> None:
    with watching("undeclared tool name", served):
        status, body = store(served, "pwn", [{"id": "t", "type": "tool", "tool": "shell"}])
        assert assert_refused(status, body, 422)["message"].startswith(
            "nodes[0].tool: unknown tool"
        )


def wait_done(target: Target, run_id: str) -> dict[str, Any]:
    """The run once it is failed or completed (30 s at most: a shared machine)."""
    deadline = time.monotonic() + 30
    while True:
        _, _, body = send(target, "GET", f"/v1/runs/{run_id}", timeout=10)
        found: dict[str, Any] = json.loads(body)
        if found["status"] in ("failed", "completed") or time.monotonic() > deadline:
            return found
        quiet_sync(0.1)  # the served process works meanwhile


def test_an_app_yaml_function_that_blocks_3_s_leaves_healthz_answering(served: Target) -> None:
    """Before: the function ran on the event loop and /healthz waited the whole 3 s."""
    with watching("an app.yaml function that sleeps 3 s", served, same_state=False) as poller:
        raw = json.dumps({"workflow": "blocking"}).encode()
        status, _, body = send(served, "POST", "/v1/runs", raw, timeout=10)
        assert status == 201, body
        found = wait_done(served, json.loads(body)["id"])
        assert found["status"] == "completed", found
        polls_meanwhile = poller.polls
    assert polls_meanwhile >= 10


def test_a_slow_declared_tool_fails_by_its_time_limit_and_healthz_answers(
    served: Target,
) -> None:
    """The tool blocks its thread for 3 s; the time limit is 0.5 s, and the step fails once
    (not retried beside the thread still sleeping). Storing and running change state; that is
    the point here."""
    node = {"id": "t", "type": "tool", "tool": "slow", "args": {"seconds": 3}}
    with watching("a declared tool that sleeps 3 s", served, same_state=False) as poller:
        status, body = store(served, "lag", [node])
        assert status == 201, body
        raw = json.dumps({"workflow": "lag"}).encode()
        status, _, body = send(served, "POST", "/v1/runs", raw, timeout=10)
        assert status == 201, body
        run_id = json.loads(body)["id"]
        found = wait_done(served, run_id)
        assert found["status"] == "failed", found
        polls_meanwhile = poller.polls
    assert polls_meanwhile >= 10  # /healthz was asked (and answered in time) while it ran
    status, _, body = send(served, "GET", f"/v1/runs/{run_id}/journal", timeout=10)
    events = json.loads(body)["events"]
    failed = [e["data"]["error"] for e in events if e["event"] == "step_failed"]
    assert len(failed) == 1, failed
    assert failed[0].startswith("tool slow did not finish within 0.5s (not retried"), failed
