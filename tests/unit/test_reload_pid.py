"""The pid file ``signoff serve`` writes and ``signoff reload`` reads: written fresh (never
through a link left in its place), removed only by its own server, and never used to signal a
process that is not a ``signoff serve``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from bot.cli.reload import cmd_reload, default_pid_file, remove_pid, write_pid


def test_the_default_pid_file_is_one_per_config_file(tmp_path: Path) -> None:
    here = default_pid_file(str(tmp_path / "app.yaml"))
    assert here == default_pid_file(os.path.relpath(tmp_path / "app.yaml"))
    assert here != default_pid_file(str(tmp_path / "other.yaml"))


def test_write_pid_replaces_a_link_instead_of_following_it(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_text("keep me")
    pids = tmp_path / "serve.pid"
    pids.symlink_to(target)
    assert write_pid(pids)
    assert target.read_text() == "keep me"
    assert not pids.is_symlink() and pids.read_text() == f"{os.getpid()}\n"
    assert pids.stat().st_mode & 0o077 == 0

    pids.write_text("1\n")  # another server wrote its own since: not ours to remove
    remove_pid(pids)
    assert pids.exists()
    pids.write_text(f"{os.getpid()}\n")
    remove_pid(pids)
    assert not pids.exists()


def test_a_pid_file_that_cannot_be_written_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not write_pid(tmp_path / "missing" / "serve.pid")
    assert "send it SIGHUP" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc (Linux)")
def test_reload_signals_no_process_that_is_not_a_signoff_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "app.yaml"
    config.write_text("people: {alice: {email: alice@example.com}}\n")
    pids = tmp_path / "serve.pid"
    args = argparse.Namespace(config=str(config), pid_file=str(pids))
    assert cmd_reload(args) == 1
    assert "no signoff serve is running" in capsys.readouterr().err

    pids.write_text(f"{os.getpid()}\n")  # this test process: alive, but no server
    assert cmd_reload(args) == 1
    assert "is not a signoff serve" in capsys.readouterr().err
