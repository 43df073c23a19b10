"""signoff cards render, through add_cards_parser as bot.cli mounts it."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest
from cardchecks import assert_valid_html, assert_valid_slack, assert_valid_teams

from cards.cli import add_cards_parser, main
from cards.samples import STATES


def run(*argv: str, stdin: str = "") -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="signoff")
    add_cards_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    out = io.StringIO()
    code = args.func(args, stdout=out, stdin=io.StringIO(stdin))
    return code, out.getvalue()


@pytest.mark.parametrize("state", STATES)
def test_render_every_state(state: str) -> None:
    code, out = run("cards", "render", "--state", state, "--platform", "slack")
    assert code == 0
    assert_valid_slack(json.loads(out))
    code, out = run("cards", "render", "--state", state, "--platform", "teams")
    assert_valid_teams(json.loads(out))
    code, out = run("cards", "render", "--state", state, "--platform", "web")
    assert_valid_html(out)


def test_args_file_and_stdin(tmp_path: Path) -> None:
    path = tmp_path / "args.json"
    path.write_text('{"to": "<!channel>"}', encoding="utf-8")
    code, out = run("cards", "render", "--platform", "slack", "--args", str(path))
    assert code == 0 and "&lt;!channel&gt;" in out
    code, out = run("cards", "render", "--platform", "teams", "--args", "-", stdin='{"n": 1}')
    assert code == 0 and '\\"n\\": 1' in out


def test_unreadable_args(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("cards", "render", "--platform", "web", "--args", str(tmp_path / "none.json"))
    assert code == 2
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    code, _ = run("cards", "render", "--platform", "web", "--args", str(tmp_path / "bad.json"))
    assert code == 2
    assert "cannot read --args" in capsys.readouterr().err


def test_notices_and_bad_choices() -> None:
    code, out = run("cards", "render", "--platform", "teams", "--notice", "step_result")
    assert code == 0 and json.loads(out)["actions"][0]["verb"] == "feedback"
    with pytest.raises(SystemExit):
        run("cards", "render", "--platform", "irc")
    with pytest.raises(SystemExit):
        run("cards", "render", "--platform", "slack", "--state", "maybe")


def test_module_main(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--platform", "slack", "--state", "granted"]) == 0
    assert json.loads(capsys.readouterr().out)["blocks"][0]["type"] == "header"
