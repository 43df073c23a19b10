"""The ``signoff`` command as a user runs it: exit codes, messages, what it stores."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from tests.support.process import ROOT, child_env, run_cli

COMMANDS = [
    (),
    ("serve",),
    ("migrate",),
    ("check",),
    ("token",),
    ("token", "create"),
    ("token", "list"),
    ("token", "revoke"),
    ("cards",),
    ("cards", "render"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "signoff")
async def test_help_on_every_command(command: tuple[str, ...]) -> None:
    code, out, _ = await run_cli(*command, "--help")
    assert code == 0
    assert "usage: signoff" in out


def write_config(tmp_path: Path, body: str = "") -> Path:
    config = tmp_path / "app.yaml"
    config.write_text(f"database: {{url: 'sqlite+aiosqlite:///{tmp_path}/s.db'}}\n{body}")
    return config


async def test_check_on_the_default_app_yaml_exits_0(tmp_path: Path) -> None:
    env = child_env(SIGNOFF_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/fresh.db")
    code, out, err = await run_cli("check", "--config", str(ROOT / "app.yaml"), env=env)
    assert code == 0, out + err
    assert "config" in out and "ok" in out
    assert "slack: unset" in out and "teams: unset" in out
    assert not (tmp_path / "fresh.db").exists()  # check looks; it does not create


async def test_check_after_migrate_reports_the_revision(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    code, out, _ = await run_cli("check", "--config", str(config))
    assert code == 0
    assert "database: ok (sqlite, revision" in out


@pytest.mark.parametrize(
    ("body", "env", "expected"),
    [
        ("server: {prot: 8080}\n", {}, "server.prot: unknown key (did you mean port?)"),
        (
            "workflows:\n  refund:\n    nodes:\n"
            "      - {id: a, type: approval, timeoutMinutes: 2000}\n",
            {},
            "workflows.refund.nodes[0].timeoutMinutes: must be 1..1440, got 2000",
        ),
        (
            "slack: {botToken: '${SLACK_TOKEN_THAT_IS_NOT_SET}'}\n",
            {},
            "slack.botToken: environment variable SLACK_TOKEN_THAT_IS_NOT_SET is not set",
        ),
    ],
    ids=["unknown-key", "out-of-range", "missing-var"],
)
async def test_broken_configs_exit_2_naming_the_yaml_path(
    tmp_path: Path, body: str, env: dict[str, str], expected: str
) -> None:
    config = write_config(tmp_path, body)
    for command in ("check", "serve", "migrate"):
        code, out, err = await run_cli(command, "--config", str(config), env=child_env(**env))
        assert code == 2, (command, out, err)
        assert expected in err, err
        assert not (tmp_path / "s.db").exists()  # nothing touched the database


async def test_token_create_prints_the_token_once_and_stores_only_its_hash(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, "people: {alice: {email: a@example.com}}\nadmins: [alice]\n")
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    code, out, _ = await run_cli(
        "token",
        "create",
        "--role",
        "admin",
        "--name",
        "x",
        "--person",
        "alice",
        "--config",
        str(config),
    )
    assert code == 0
    token = out.strip().splitlines()[-1]
    assert token.startswith("so_") and len(token) > 40
    with sqlite3.connect(tmp_path / "s.db") as db:
        rows = db.execute("SELECT name, role, person, token_hash FROM api_tokens").fetchall()
        dump = "\n".join(db.iterdump())
    assert rows == [("x", "admin", "alice", hashlib.sha256(token.encode()).hexdigest())]
    assert token not in dump  # the token itself is nowhere in the database

    code, out, _ = await run_cli("token", "list", "--config", str(config))
    assert code == 0 and "x\tadmin\talice\tactive" in out and token not in out

    code, _, err = await run_cli(
        "token",
        "create",
        "--role",
        "admin",
        "--name",
        "x",
        "--person",
        "alice",
        "--config",
        str(config),
    )
    assert code == 1 and "already exists" in err

    code, _, err = await run_cli(
        "token",
        "create",
        "--role",
        "agent",
        "--name",
        "y",
        "--person",
        "nobody",
        "--config",
        str(config),
    )
    assert code == 2 and "nobody" in err

    assert (await run_cli("token", "revoke", "x", "--config", str(config)))[0] == 0
    code, out, _ = await run_cli("token", "list", "--config", str(config))
    assert "revoked" in out
    code, _, err = await run_cli("token", "revoke", "x", "--config", str(config))
    assert code == 1 and "no active token" in err


async def test_token_create_refuses_an_admin_token_for_someone_not_in_admins(
    tmp_path: Path,
) -> None:
    people = "people: {alice: {email: a@example.com}, carol: {email: c@example.com}}\n"
    config = write_config(tmp_path, people + "admins: [alice]\n")
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    admin = ("token", "create", "--role", "admin", "--name", "c", "--config", str(config))
    code, out, err = await run_cli(*admin, "--person", "carol")
    assert code == 2, (out, err)
    assert "error: --person 'carol' is not in admins: (admins: alice); no token created" in err
    code, out, err = await run_cli(*admin)  # no person: nobody to be an admin
    assert code == 2 and "an admin token needs --person" in err, (out, err)
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT count(*) FROM api_tokens").fetchone() == (0,)
    code, _, err = await run_cli(*admin, "--person", "alice")
    assert code == 0, err
    code, _, err = await run_cli(  # carol may still have an approver token
        "token",
        "create",
        "--role",
        "approver",
        "--name",
        "c2",
        "--person",
        "carol",
        "--config",
        str(config),
    )
    assert code == 0, err


async def test_cards_render_prints_a_card(tmp_path: Path) -> None:
    code, out, _ = await run_cli("cards", "render", "--state", "pending", "--platform", "teams")
    assert code == 0
    assert '"type": "AdaptiveCard"' in out
