"""The ``signoff`` command as a user runs it: exit codes, messages, what it stores."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import sqlite3
import sys
from asyncio.subprocess import PIPE
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.process import ROOT, child_env, run_cli

COMMANDS = [
    (),
    ("init",),
    ("serve",),
    ("migrate",),
    ("check",),
    ("token",),
    ("token", "create"),
    ("token", "list"),
    ("token", "revoke"),
    ("login-link",),
    ("cards",),
    ("cards", "render"),
    ("teams",),
    ("teams", "package"),
    ("demo",),
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


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("--help",), "usage: signoff"),
        (("teams", "package", "--help"), "usage: signoff"),
        (("--version",), "signoff 0."),
    ],
    ids=["signoff", "teams package", "version"],
)
async def test_help_imports_no_chat_sdk_and_no_web_server(argv: tuple[str, ...], said: str) -> None:
    """``signoff --help`` builds the parser only: botbuilder alone took 6 s to import. So does
    ``signoff teams package --help``: its command lives in the Teams channel's package, whose
    own module imports nothing (``bot.teams.channel`` holds what imports the SDK). So does
    ``signoff --version``."""
    probe = (
        "import sys\n"
        "from bot.cli import main\n"
        f"try:\n    main({list(argv)!r})\nexcept SystemExit as stop:\n"
        "    assert stop.code in (0, None), stop.code\n"
        "heavy = ('botbuilder', 'botframework', 'slack_bolt', 'slack_sdk', 'jinja2',"
        " 'sqlalchemy', 'asyncio')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m == 'aiohttp.web'),"
        " file=sys.stderr)\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", probe, cwd=ROOT, env=child_env(), stdout=PIPE, stderr=PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert said in out.decode()
    assert err.decode().strip() == "[]"


# What a command that only reads or writes a table must not import: the chat SDKs, the web server
# and its client, the whole engine (engine.assembly), the console's pages, the cards, and Alembic
# (only migrating needs it; the schema's revision is read without it).
NOT_FOR_THE_STORE = (
    "botbuilder", "botframework", "slack_bolt", "slack_sdk", "aiohttp", "engine.assembly",
    "bot.app", "bot.console", "cards", "alembic",
)  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [
        ("token", "list"),
        ("token", "create", "--role", "agent", "--name", "probe"),
        ("token", "revoke", "nope"),
        ("login-link",),
        ("check",),
    ],
    ids=" ".join,
)
async def test_store_commands_import_no_web_server_no_chat_sdk_no_engine(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """Each command imports only what it needs (the start time of a command is mostly its
    imports: the whole engine and aiohttp took as long again as its database work)."""
    config = write_config(tmp_path, "people: {alice: {}}\nadmins: [alice]\n")
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    probe = (
        "import sys\n"
        "from bot.cli import main\n"
        f"try:\n    main({[*argv, '--config', str(config)]!r})\nexcept SystemExit:\n    pass\n"
        f"heavy = {NOT_FOR_THE_STORE!r}\n"
        "print(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') "
        "for h in heavy)))\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", probe, cwd=ROOT, env=child_env(), stdout=PIPE, stderr=PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip().splitlines()[-1] == "[]", out.decode() + err.decode()


async def test_version_prints_the_installed_version_and_exits_0() -> None:
    from importlib.metadata import version

    code, out, err = await run_cli("--version")
    assert code == 0, err
    assert out == f"signoff {version('signoff')}\n"


async def test_check_on_the_default_app_yaml_and_a_fresh_database_exits_2(
    tmp_path: Path,
) -> None:
    env = child_env(SIGNOFF_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/fresh.db")
    code, out, err = await run_cli("check", "--config", str(ROOT / "app.yaml"), env=env)
    assert code == 2, out + err
    assert "config" in out and "ok" in out
    assert "slack: unset" in out and "teams: unset" in out and "email: unset" in out
    assert "database not migrated: run `signoff migrate`" in out
    assert not (tmp_path / "fresh.db").exists()  # check looks; it does not create


@pytest.mark.parametrize(
    "command",
    [
        ("token", "create", "--role", "agent", "--name", "a"),
        ("token", "list"),
        ("token", "revoke", "a"),
        ("demo", "--timeout", "1"),
        ("login-link",),
    ],
    ids=lambda c: " ".join(c[:2]),
)
async def test_commands_on_an_unmigrated_database_say_so_and_create_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    env = child_env(SIGNOFF_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/fresh.db")
    code, out, err = await run_cli(*command, "--config", str(ROOT / "app.yaml"), env=env)
    assert code == 2, out + err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("error: database not migrated: run `signoff migrate`")
    ), err
    assert "Traceback" not in err
    assert not (tmp_path / "fresh.db").exists()


async def test_commands_on_a_database_file_never_migrated_say_so(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with sqlite3.connect(tmp_path / "s.db") as db:  # a file, but no migration
        db.execute("CREATE TABLE api_tokens (name TEXT)")
    code, _, err = await run_cli("token", "list", "--config", str(config))
    assert code == 2 and "database not migrated: run `signoff migrate`" in err, err
    code, out, _ = await run_cli("check", "--config", str(config))
    assert code == 2 and "database not migrated" in out


async def test_check_after_migrate_reports_the_revision(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    code, out, _ = await run_cli("check", "--config", str(config))
    assert code == 0
    assert "database: ok (sqlite, revision" in out


async def test_migrate_and_token_create_print_no_log_lines(tmp_path: Path) -> None:
    """Alembic logs at INFO whenever the schema is read or upgraded; a normal run of a command
    shows only what the command itself says, and migrate says whether it changed anything."""
    config = write_config(tmp_path)
    runs = [
        ("migrate", "database migrated to revision"),
        ("migrate", "database already up to date (revision"),
        ("token create --role agent --name quiet", "created agent token 'quiet'"),
        ("token list", "quiet"),
        ("check", "database: ok"),
    ]
    for command, said in runs:
        code, out, err = await run_cli(*command.split(), "--config", str(config))
        assert code == 0, (command, out, err)
        assert said in out, (command, out)
        noisy = [line for line in err.splitlines() if "INFO" in line or "alembic" in line]
        assert noisy == [], (command, err)


@pytest.mark.parametrize(
    "command",
    [
        ("check",),
        ("migrate",),
        ("serve",),
        ("token", "list"),
        ("login-link",),
        ("demo",),
        ("teams", "package"),
    ],
    ids=" ".join,
)
async def test_a_missing_config_says_what_to_do_in_one_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    missing = tmp_path / "app.yaml"
    code, out, err = await run_cli(*command, "--config", str(missing))
    assert code == 2, out + err
    assert err.splitlines() == [
        f"error: no configuration at {missing}: pass --config PATH, set SIGNOFF_CONFIG, or run"
        f' "signoff init --config {missing}" to write a starter app.yaml'
    ]
    assert not missing.exists()


async def test_a_missing_default_config_suggests_plain_init(tmp_path: Path) -> None:
    missing = str(tmp_path / "app.yaml")
    code, _, err = await run_cli("check", env=child_env(SIGNOFF_CONFIG=missing))
    assert code == 2
    assert f"no configuration at {missing}:" in err and 'run "signoff init" to write' in err


def test_the_starter_config_is_the_shipped_app_yaml() -> None:
    from bot.cli.init import starter_config

    assert starter_config() == (ROOT / "app.yaml").read_text(encoding="utf-8")


async def test_init_writes_a_starter_that_check_accepts_and_never_overwrites(
    tmp_path: Path,
) -> None:
    config = tmp_path / "app.yaml"
    code, out, err = await run_cli("init", "--config", str(config))
    assert code == 0, err
    assert f"wrote {config}" in out
    assert config.read_text(encoding="utf-8") == (ROOT / "app.yaml").read_text(encoding="utf-8")

    env = child_env(SIGNOFF_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/fresh.db")
    code, out, err = await run_cli("check", "--config", str(config), env=env)
    assert code == 2, out + err  # only because the database is not migrated yet
    assert f"config {config}: ok" in out
    assert "database: database not migrated: run `signoff migrate`" in out
    assert "config error" not in err

    config.write_text("# mine\n", encoding="utf-8")
    code, out, err = await run_cli("init", "--config", str(config))
    assert code == 2
    assert err.splitlines() == [
        f"error: {config} already exists and was left as it is: edit it, or pass --config PATH"
        " to write the starter somewhere else"
    ]
    assert config.read_text(encoding="utf-8") == "# mine\n"


async def test_init_into_a_folder_that_does_not_exist_says_so(tmp_path: Path) -> None:
    config = tmp_path / "nowhere" / "app.yaml"
    code, _, err = await run_cli("init", "--config", str(config))
    assert code == 2  # a refusal, as every other: nothing written
    assert err.splitlines() == [
        f"error: cannot write {config}: its folder does not exist (create it first)"
    ]


async def test_demo_without_the_demo_workflow_exits_2_in_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    code, out, err = await run_cli("demo", "--config", str(config))
    assert (code, out) == (2, ""), err
    assert err.splitlines() == [
        f"error: {config} has no refund-demo workflow (the starter app.yaml of signoff init "
        "has one); no run started"
    ]


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


async def test_a_malformed_policy_rule_stops_check_migrate_and_serve(tmp_path: Path) -> None:
    config = write_config(tmp_path, "policies:\n  - {decision: blok, connector: mailer}\n")
    for command in ("check", "migrate", "serve"):
        code, out, err = await run_cli(command, "--config", str(config))
        assert code == 2, (command, out, err)
        assert (
            'config error: policies[0].decision: must be allow, ask or block, got string "blok"'
            in err
        ), (command, err)
        assert "serving" not in out
        assert not (tmp_path / "s.db").exists()


async def test_check_lists_every_problem_of_independent_sections_in_one_run(
    tmp_path: Path,
) -> None:
    """Not the first problem only, and not the malformed rules only once the rest is fixed."""
    config = write_config(
        tmp_path,
        "server: {port: 99999}\n"
        "people: {alice: {slack: not-an-id}}\n"
        "connectors: {mailer: {type: smtpp}}\n"
        "policies:\n  - {decision: blok, connector: mailer}\n"
        "workflows:\n  refund:\n    nodes:\n"
        "      - {id: a, type: approval, channels: ['slack:#general']}\n"
        "      - {id: b, type: approval, approvers: [nobody]}\n",
    )
    code, out, err = await run_cli("check", "--config", str(config))
    assert code == 2, out + err
    assert out == ""
    assert sorted(err.strip().splitlines()) == [
        "config error: connectors.mailer.type: must be one of http, python, demo-ledger, "
        'got "smtpp"',
        "config error: people.alice.slack: must be a Slack user id like U012ABCDEF, "
        'got "not-an-id"',
        'config error: policies[0].decision: must be allow, ask or block, got string "blok"',
        "config error: server.port: must be 1..65535, got 99999",
        "config error: workflows.refund.nodes[0].channels[0]: slack channel must be a channel id "
        'like C0123ABCD, @<person or group> or dm, got "#general"',
        'config error: workflows.refund.nodes[1].approvers[0]: unknown person or group "nobody"',
    ]


async def test_serve_on_a_taken_port_says_so_in_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, "people: {alice: {email: a@example.com}}\nadmins: [alice]\n")
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = await run_cli("serve", "--config", str(config), "--port", str(port))
    assert code == 2, out + err
    assert out == ""  # neither "serving" nor a sign-in link
    (line,) = err.strip().splitlines()
    assert f"port {port} on 127.0.0.1 is already in use" in line and "SIGNOFF_PORT" in line
    with sqlite3.connect(tmp_path / "s.db") as db:  # no sign-in token was made either
        assert db.execute("SELECT count(*) FROM api_tokens").fetchone() == (0,)


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
    assert code == 2, err
    assert err.strip().splitlines()[-1] == (
        "error: a token named 'x' already exists (revoked ones keep their names); "
        "choose another --name; no token created"
    )

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
    assert code == 2, err  # a refusal, like every other
    assert err.splitlines() == [
        f"error: the token 'x' was already revoked on {datetime.now(UTC):%Y-%m-%d}; nothing revoked"
    ]


async def test_token_revoke_of_an_unknown_name_exits_2_naming_the_tokens(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    code, _, err = await run_cli("token", "revoke", "nope", "--config", str(config))
    assert code == 2
    assert err.splitlines() == [
        "error: there is no token named 'nope' (tokens: none yet; `signoff token list`); "
        "nothing revoked"
    ]
    create = ("token", "create", "--role", "agent", "--name", "bot", "--config", str(config))
    assert (await run_cli(*create))[0] == 0
    code, _, err = await run_cli("token", "revoke", "bott", "--config", str(config))
    assert code == 2 and "(tokens: bot;" in err
    code, out, _ = await run_cli("token", "list", "--config", str(config))
    assert "\tactive" in out  # bot untouched


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


async def test_token_create_for_a_group_says_a_token_belongs_to_one_person(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path, "people: {alice: {}, bob: {}}\ngroups: {finance: [alice, bob]}\n"
    )
    assert (await run_cli("migrate", "--config", str(config)))[0] == 0
    code, out, err = await run_cli(
        "token",
        "create",
        "--role",
        "approver",
        "--name",
        "f",
        "--person",
        "finance",
        "--config",
        str(config),
    )
    assert code == 2, (out, err)
    assert err.strip().splitlines()[-1] == (
        "error: --person 'finance' is a group (in groups:), not a person: a token belongs to one "
        "person of people: (finance: alice, bob); no token created"
    )
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT count(*) FROM api_tokens").fetchone() == (0,)


async def test_cards_render_prints_a_card(tmp_path: Path) -> None:
    code, out, _ = await run_cli("cards", "render", "--state", "pending", "--platform", "teams")
    assert code == 0
    assert '"type": "AdaptiveCard"' in out
