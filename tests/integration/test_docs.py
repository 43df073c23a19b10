"""Every code block of README.md and docs/*.md that is meant to run runs, against a real
``signoff serve`` of the repository's ``app.yaml`` on a fresh SQLite file.

Which blocks run is said by the fence's info string:

* ```` ```sh ````, ```` ```bash ```` and ```` ```python ```` blocks are meant to run. Each runs
  as its own process in an empty directory: shell blocks with ``bash -euo pipefail`` and the
  virtualenv's ``bin`` first on ``PATH`` (so ``signoff`` is the CLI under test), Python blocks
  with this interpreter.
* Any other info string (``text``, ``yaml``, ``json`` ...) marks an illustration: output, a
  fragment of ``app.yaml``, chat messages. It is not run. A fence with no info string fails the
  test: say which it is.
* A ``yaml`` block that writes ``workflows:`` must load: added to the repository's
  ``app.yaml``, it passes the configuration loader (connectors, people and groups exist).
* A runnable block preceded by ``<!-- docs: not run (reason) -->`` is left out, and the reason
  is required: ``make run`` / ``make test`` (the commands these tests run under), a process that
  runs until stopped, a line to fill in with your own credentials.

The blocks see what the docs tell a reader to set up: ``SIGNOFF_URL`` (the served instance),
``SIGNOFF_AGENT_TOKEN`` (an agent token), ``SIGNOFF_CONFIG`` (the served ``app.yaml``, with the
database, port and ``MAILER_URL`` set in the environment), ``MAILER_URL`` (a local receiver
that answers like a mail service and records what it was sent) and ``TEAMS_APP_ID``.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from engine.config import parse_config
from engine.domain.errors import ConfigError
from tests.support.process import ROOT, Server, call, child_env, free_port, run_cli
from tests.support.waiting import quiet

RUNNABLE = {"sh": "bash", "bash": "bash", "python": "python"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^`\s]*)[^`]*$")
NOT_RUN = re.compile(r"^\s*<!-- docs: not run \((?P<reason>[^)]+)\) -->\s*$")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    info: str
    code: str
    not_run: str | None  # the reason given in a "docs: not run" marker

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, dedented by its fence's indentation."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        indent, start = len(opened["indent"]), i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        previous = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
        marker = NOT_RUN.match(previous)
        found.append(
            Block(
                path,
                start + 1,
                opened["info"],
                "\n".join(body) + "\n",
                marker["reason"] if marker else None,
            )
        )
        i += 1
    return found


ALL = [block for path in DOCS for block in blocks(path)]
TO_RUN = [b for b in ALL if b.info in RUNNABLE and b.not_run is None]


def test_every_block_says_whether_it_runs() -> None:
    unmarked = [b.name for b in ALL if not b.info]
    assert not unmarked, f"fences without an info string (```text for illustrations): {unmarked}"
    assert TO_RUN, "no runnable blocks found"
    assert [b.name for b in ALL if b.not_run is not None and b.info not in RUNNABLE] == []
    skipped = {b.name: b.not_run for b in ALL if b.not_run is not None}
    assert all(reason.strip() for reason in skipped.values())


def _workflow_snippets() -> list[Block]:
    """The ``yaml`` blocks that write workflows: fragments of ``app.yaml`` a reader adds."""
    found = []
    for block in ALL:
        if block.info != "yaml":
            continue
        data = yaml.safe_load(block.code)
        if isinstance(data, dict) and "workflows" in data:
            found.append(block)
    return found


WORKFLOW_SNIPPETS = _workflow_snippets()


def test_the_slack_guides_workflow_is_among_the_snippets_checked() -> None:
    assert any(b.path.name == "slack.md" for b in WORKFLOW_SNIPPETS)


@pytest.mark.parametrize("block", WORKFLOW_SNIPPETS, ids=lambda b: b.name)
def test_a_workflow_snippet_loads_with_the_shipped_app_yaml(block: Block) -> None:
    """Added to the repository's ``app.yaml`` (its sections' entries beside the shipped ones),
    the snippet passes the configuration loader: every connector, person and group it names
    exists there or in the snippet."""
    merged = yaml.safe_load((ROOT / "app.yaml").read_text())
    for key, value in yaml.safe_load(block.code).items():
        shipped = merged.get(key)
        both = isinstance(value, dict) and isinstance(shipped, dict)
        merged[key] = {**shipped, **value} if both else value
    try:
        parse_config(yaml.safe_dump(merged, sort_keys=False), {}, block.name)
    except ConfigError as exc:
        pytest.fail(f"{block.name} does not load: {exc.problems}", pytrace=False)


def _snippets_with(*keys: str) -> list[Block]:
    """The ``yaml`` blocks writing any of these top-level ``keys``."""
    found = []
    for block in ALL:
        data = yaml.safe_load(block.code) if block.info == "yaml" else None
        if isinstance(data, dict) and any(key in data for key in keys):
            found.append(block)
    return found


SLACK_SNIPPETS = _snippets_with("slack")
MANIFEST = ROOT / "bot" / "manifests" / "slack.yaml"
MANIFEST_SNIPPETS = _snippets_with("settings", "features", "oauth_config")
# What the guide's snippets read from the environment, as a reader would have set it.
SLACK_ENV = {
    "SLACK_BOT_TOKEN": "xoxb-docs-bot-token",
    "SLACK_SIGNING_SECRET": "0123456789abcdef0123456789abcdef",
    "SLACK_APP_TOKEN": "xapp-1-docs-app-token",
    "SLACK_CLIENT_ID": "1234567890.0987654321",
    "SLACK_CLIENT_SECRET": "docs-client-secret",
    "SIGNOFF_SECRET_KEY": "docs-secret-key-docs-secret-key-0123",
}


def test_the_socket_mode_snippets_are_among_those_checked() -> None:
    slack = [b for b in SLACK_SNIPPETS if "socketMode" in b.code]
    manifest = [b for b in MANIFEST_SNIPPETS if "socket_mode_enabled" in b.code]
    assert slack and manifest


@pytest.mark.parametrize("block", SLACK_SNIPPETS, ids=lambda b: b.name)
def test_a_slack_snippet_loads_and_turns_slack_on(block: Block) -> None:
    """A ``slack:`` section from the docs, in place of the shipped one (its other sections'
    entries beside the shipped ones), loads with the tokens set, and Slack is on."""
    merged = yaml.safe_load((ROOT / "app.yaml").read_text())
    for key, value in yaml.safe_load(block.code).items():
        shipped = merged.get(key)
        both = isinstance(value, dict) and isinstance(shipped, dict) and key != "slack"
        merged[key] = {**shipped, **value} if both else value
    try:
        config = parse_config(yaml.safe_dump(merged, sort_keys=False), SLACK_ENV, block.name)
    except ConfigError as exc:
        pytest.fail(f"{block.name} does not load: {exc.problems}", pytrace=False)
    assert config.slack.enabled, block.name


def _unknown_paths(snippet: Any, shipped: Any, at: str = "") -> list[str]:
    if not isinstance(snippet, dict):
        return []
    if not isinstance(shipped, dict):
        return [at or "(root)"]
    out = []
    for key, value in snippet.items():
        path = f"{at}.{key}" if at else str(key)
        out += [path] if key not in shipped else _unknown_paths(value, shipped[key], path)
    return out


@pytest.mark.parametrize("block", MANIFEST_SNIPPETS, ids=lambda b: b.name)
def test_a_manifest_snippet_changes_keys_the_shipped_manifest_has(block: Block) -> None:
    """A change the docs tell a reader to make to ``bot/manifests/slack.yaml`` names keys it
    has (a misspelt key would be a setting Slack ignores, or refuses)."""
    shipped = yaml.safe_load(MANIFEST.read_text())
    assert _unknown_paths(yaml.safe_load(block.code), shipped) == [], block.name


@dataclass
class Served:
    """The environment the blocks run with, and what the stand-in mail service was sent."""

    env: dict[str, str]
    mails: list[dict[str, Any]]
    base: str
    approver: str  # bob's token: bob is in finance, who decide the held calls


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """The repository's app.yaml served on a fresh SQLite file, with a mailer to post to."""
    sent: list[dict[str, Any]] = []

    async def send(request: web.Request) -> web.Response:
        sent.append(await request.json())
        return web.json_response({"id": f"m-{len(sent)}", "queued": True})

    app = web.Application()
    app.router.add_post("/send", send)
    runner = web.AppRunner(app)
    await runner.setup()
    mail_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", mail_port).start()
    port = free_port()
    server_env = {
        "SIGNOFF_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/signoff.db",
        "SIGNOFF_PORT": str(port),
        "MAILER_URL": f"http://127.0.0.1:{mail_port}",
        # ``signoff reload`` finds this server through its own pid file, not another test's.
        "XDG_RUNTIME_DIR": str(tmp_path),
    }
    config = str(ROOT / "app.yaml")
    code, _, err = await run_cli("migrate", "--config", config, env=child_env(**server_env))
    assert code == 0, err
    code, out, err = await run_cli(
        "token",
        "create",
        "--role",
        "agent",
        "--name",
        "docs-agent",
        "--config",
        config,
        env=child_env(**server_env),
    )
    assert code == 0, err
    agent = out.strip().splitlines()[-1]
    code, out, err = await run_cli(
        "token",
        "create",
        "--role",
        "approver",
        "--name",
        "docs-bob",
        "--person",
        "bob",
        "--config",
        config,
        env=child_env(**server_env),
    )
    assert code == 0, err
    server = Server(Path(config), port, tmp_path / "server.log", env=server_env)
    await server.start()
    try:
        bin_dir = str(Path(sys.executable).parent)
        env = child_env(
            **server_env,
            SIGNOFF_CONFIG=config,
            SIGNOFF_URL=f"http://127.0.0.1:{port}",
            SIGNOFF_AGENT_TOKEN=agent,
            TEAMS_APP_ID="5d2f1e0a-3b4c-4d5e-8f90-a1b2c3d4e5f6",
            PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
            # ``signoff`` is this checkout's CLI, also where the virtualenv was installed from
            # another checkout (a worktree sharing it).
            PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        )
        yield Served(env, sent, server.base, out.strip().splitlines()[-1])
    finally:
        await server.stop()
        await runner.cleanup()
        log = (tmp_path / "server.log").read_text()
        assert "Traceback" not in log, log


@pytest.mark.parametrize("block", TO_RUN, ids=lambda b: b.name)
async def test_the_block_runs(block: Block, served: Served, tmp_path: Path) -> None:
    script = tmp_path / ("block.py" if RUNNABLE[block.info] == "python" else "block.sh")
    script.write_text(block.code)
    command = (
        [sys.executable, str(script)]
        if RUNNABLE[block.info] == "python"
        else ["bash", "-euo", "pipefail", str(script)]
    )
    work = tmp_path / "cwd"
    work.mkdir()
    held_call = '"demo-ledger",\n            "refund"' in block.code  # the README's held call
    proc = await asyncio.create_subprocess_exec(
        *command,
        cwd=work,
        env=served.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    # A reader decides once the agent has said where: for the held call, bob starts looking
    # only after "decide at" is printed (deciding sooner answers the call's first request and
    # the agent is, rightly, never told of a hold that is already over).
    approving = None if held_call else asyncio.create_task(approve_whatever_waits(served))
    lines: list[bytes] = []
    try:
        async with asyncio.timeout(120):
            async for line in proc.stdout:
                lines.append(line)
                if approving is None and line.startswith(b"decide at "):
                    approving = asyncio.create_task(approve_whatever_waits(served))
            await proc.wait()
    finally:
        if approving is not None:
            approving.cancel()
    out = b"".join(lines)
    assert proc.returncode == 0, f"{block.name} failed:\n{block.code}\n--- output\n{out.decode()}"
    if '"mailer", "send"' in block.code:  # the client snippets really reached the mailer
        assert served.mails, "the mailer received nothing"
    if held_call:
        text = out.decode()
        held = "held for a person: demo-ledger.refund with 3 arguments (order, amount, currency)"
        shown = text.index(held + "\ndecide at ")
        assert f"{served.base}/approvals/" in text[shown:], text
        assert text.index("approved; the ledger answered: {") > shown, text


async def approve_whatever_waits(served: Served) -> None:
    """Bob, a person in finance, approves every request that waits (a held call in a block
    waits for a person, as it would for the reader)."""
    async with aiohttp.ClientSession() as http:
        while True:
            _, waiting = await call(
                http, "GET", f"{served.base}/v1/runs?status=waiting", served.approver
            )
            for run in waiting["runs"]:
                url = f"{served.base}/v1/runs/{run['id']}/takeover"
                _, found = await call(http, "GET", url, served.approver)
                for request in found["requests"]:
                    if request["status"] == "pending":
                        await call(
                            http,
                            "POST",
                            f"{url}/{request['id']}/grant",
                            served.approver,
                            {"release": True},
                        )
            await quiet(0.2)  # a person looks again a moment later (a real served process)
