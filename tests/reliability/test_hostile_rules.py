"""Hostile cases of issue 29 items 6 and 8, against a real ``signoff serve`` on SQLite:

* a ``re:`` condition written to backtrack (``^(\\w+\\s?)*$``) meets an agent's argument built to
  make it (``'a' * 24 + '!'`` took 3 s and froze ``/healthz`` on Python's ``re``): RE2 answers at
  once, and an argument over the 64 KiB a condition reads fails closed;
* a person removed from ``people:``, or only from the group that asked them (still in
  ``people:``), and restarted away keeps none of the say the pending request fixed for them
  when it parked.

Each runs under ``watching``: ``/healthz`` within 1 s, no traceback, no row changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

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
    config_body,
    running,
    serve,
)
from tests.support.process import ROOT, child_env, free_port

# Each "note" call here is blocked: by "words" when its q matches, else by "rest" (q ends in !).
# A blocked call stores nothing, so the state check holds, and which rule answered shows the
# match was made. A q too long to read matches neither: "words" fails closed, naming q.
REDOS = r"""connectors:
  demo-ledger:
    type: demo-ledger
    actions: {refund: {kind: write}, note: {kind: write}}
policies:
  - {name: words, decision: block, connector: demo-ledger, action: note,
     conditions: [{arg: q, match: 're:^(\w+\s?)*$'}]}
  - {name: rest, decision: block, connector: demo-ledger, action: note,
     conditions: [{arg: q, match: 're:!$'}]}
"""


@pytest.fixture(scope="module")
def redos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    body = config_body().replace(WORKFLOWS, REDOS + WORKFLOWS)
    with serve(tmp_path_factory.mktemp("redos"), body) as target:
        yield target


@pytest.mark.parametrize(
    ("q", "rule", "says"),
    [
        ("a" * 24 + "!", "rest", "rest"),  # 3 s on Python's re, doubling per character
        ("a" * 40 + "!", "rest", "rest"),
        ("a" * 60_000 + "!", "rest", "rest"),
        ("two words", "words", "words"),  # and it still matches
        ("a" * 70_000, "words", "longer than 65,536 characters"),  # unread: fails closed
    ],
    ids=["24", "40", "60000", "match", "over-long"],
)
def test_a_backtracking_pattern_answers_at_once(redos: Target, q: str, rule: str, says: str):
    call = {"connector": "demo-ledger", "action": "note", "args": {"q": q}}
    with watching(f"re: condition, {len(q)} characters", redos):
        started = time.perf_counter()
        status, _, body = send(redos, "POST", "/v1/calls", json.dumps(call).encode(), timeout=10)
        took = time.perf_counter() - started
        error = assert_refused(status, body, 403)
    assert (error["error"], error["rule"]) == ("blocked", rule), error
    assert says in error["message"], error
    assert took < 0.5, f"{took:.3f} s"


@pytest.mark.parametrize(
    ("pattern", "says"),
    [(r"^(a+)\1$", "backreferences"), (r"^(?!.*@evil\.example$)", "lookahead")],
)
def test_a_pattern_re2_cannot_run_keeps_the_server_from_starting(
    tmp_path: Path, pattern: str, says: str
) -> None:
    quoted = pattern.replace("\\", "\\\\")
    config = tmp_path / "app.yaml"
    config.write_text(
        f"database: {{url: 'sqlite+aiosqlite:///{tmp_path / 'db'}'}}\n"
        "policies:\n"
        f'  - {{decision: block, conditions: [{{arg: to, match: "re:{quoted}"}}]}}\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", "--config", str(config)],
        cwd=ROOT,
        env=child_env(**NO_WAY_OUT),
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = out.stdout + out.stderr
    assert out.returncode != 0, said
    assert "policies[0].conditions[0].match" in said and says in said, said
    assert "Traceback" not in said, said


# -- item 8: the configuration in force now decides ----------------------------------------------

# bob, the pending request's only approver, leaves: out of people:, and the workflow now names
# mallory. The request parked before the edit still lists bob.
WITHOUT_BOB = "\n".join(
    line for line in config_body().splitlines() if not line.startswith("  bob:")
).replace("approvers: [bob]", "approvers: [mallory]")


@contextmanager
def restarted(before: Target, tmp: Path, body: str) -> Iterator[Target]:
    """``signoff serve`` again on ``before``'s database (its tokens and parked run), with
    ``body`` as the configuration."""
    port = free_port()
    config = tmp / "app-after.yaml"
    config.write_text(
        f"database: {{url: 'sqlite+aiosqlite:///{before.db}'}}\n"
        f"server: {{host: 127.0.0.1, port: {port}, pollSeconds: 0.2}}\n" + body + "\n"
    )
    base = f"http://127.0.0.1:{port}"
    with running(config, base, tmp / "server-after.log"):
        yield replace(before, base=base, log=tmp / "server-after.log", _log_seen=0)


def test_an_approver_removed_from_people_is_refused_after_a_restart(tmp_path: Path) -> None:
    with serve(tmp_path, config_body()) as before:
        pass  # a pay run parked for bob, then the server stops
    at = f"/v1/runs/{before.run_id}/takeover/{before.request_id}"
    with restarted(before, tmp_path, WITHOUT_BOB) as after:
        with watching("removed approver after a restart", after):
            for verb, body in (("grant", {}), ("grant", {"release": True}), ("deny", {})):
                raw = json.dumps(body).encode()
                status, _, answer = send(after, "POST", f"{at}/{verb}", raw, token="approver")
                error = assert_refused(status, answer, 403)
                assert "bob is no longer in people:" in error["message"], error
        # the admin, still listed, decides it (an admin override): the refusal was bob's alone
        status, _, answer = send(after, "POST", f"{at}/deny", b"{}", token="admin")
        assert status == 200, answer[:300]
        assert json.loads(answer)["status"] == "denied"


# The pay run parks for finance = [bob, carol]; bob then leaves finance but stays in people:.
CAROL = "  carol: {email: carol@example.com}\n"
FOR_FINANCE = (
    config_body()
    .replace("people:\n", "people:\n" + CAROL)
    .replace("admins: [alice]\n", "admins: [alice]\ngroups: {finance: [bob, carol]}\n")
    .replace("approvers: [bob]", "approvers: [finance]")
)
BOB_LEFT_FINANCE = FOR_FINANCE.replace("finance: [bob, carol]", "finance: [carol]")


def approver_token(config: Path, person: str) -> str:
    """``signoff token create`` for ``person`` under ``config`` (its database)."""
    create = ["token", "create", "--role", "approver", "--name", person, "--person", person]
    return _cli(config, *create).strip().splitlines()[-1]


def test_an_approver_removed_from_the_group_only_is_refused_after_a_restart(
    tmp_path: Path,
) -> None:
    with serve(tmp_path, FOR_FINANCE) as before:
        pass  # a pay run parked for finance (bob and carol), then the server stops
    at = f"/v1/runs/{before.run_id}/takeover/{before.request_id}"
    restart = tmp_path / "carol.yaml"  # the edited file, to mint carol's token on the same db
    restart.write_text(f"database: {{url: 'sqlite+aiosqlite:///{before.db}'}}\n" + BOB_LEFT_FINANCE)
    carol = approver_token(restart, "carol")
    with restarted(before, tmp_path, BOB_LEFT_FINANCE) as after:
        with watching("approver removed from a group after a restart", after):
            for verb, body in (("grant", {}), ("grant", {"release": True}), ("deny", {})):
                raw = json.dumps(body).encode()
                status, _, answer = send(after, "POST", f"{at}/{verb}", raw, token="approver")
                error = assert_refused(status, answer, 403)
                assert (
                    "bob is no longer among this request's approvers (finance)" in error["message"]
                ), error
        # carol, still in finance, decides it as one of its approvers, not as an override
        after.tokens["carol"] = carol
        raw = json.dumps({"release": True}).encode()
        status, _, answer = send(after, "POST", f"{at}/grant", raw, token="carol")
        assert status == 200, answer[:300]
        decided = json.loads(answer)
        assert decided["status"] != "pending" and decided["decidedBy"] == "carol", decided
