"""``signoff reload``: apply ``people:`` (and groups, admins, approvers) to a running
``signoff serve`` without a restart.

The command checks the file first with the loader every command uses (a problem is a
``config error:`` line naming its YAML path, exit 2, and the server is not disturbed), then
sends SIGHUP to the server, found through the pid file ``signoff serve`` writes (``PID_SUFFIX``
after the config's path, or ``--pid-file``). SIGHUP alone does the same (``kill -HUP <pid>``).
The server reads the file again itself and logs what it applied and which changed sections need
a restart (``bot.reload``). A signal, not an HTTP endpoint: it needs no credential beyond being
allowed to signal the process, and nothing on the network can ask for it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

from bot.cli.checks import add_config, load

PID_SUFFIX = ".pid"
EXIT_NO_SERVER = 1


def add_parser(sub: Any) -> None:
    reload = sub.add_parser(
        "reload",
        help="apply people:, groups:, admins: and approvers: to the running server",
    )
    add_config(reload)
    add_pid_file(reload)
    reload.set_defaults(func=cmd_reload)


def add_pid_file(parser: argparse.ArgumentParser) -> None:
    """``--pid-file``: where ``signoff serve`` writes its process id (``serve`` and
    ``reload`` take it; several servers on one host with one config need one each)."""
    parser.add_argument(
        "--pid-file",
        help=f"the server's process id file (default: the config's path + {PID_SUFFIX})",
    )


def pid_file(args: argparse.Namespace) -> Path:
    return Path(args.pid_file or f"{args.config}{PID_SUFFIX}")


def write_pid(path: Path) -> None:
    """Record this process as the server of its configuration."""
    path.write_text(f"{os.getpid()}\n", encoding="ascii")


def remove_pid(path: Path) -> None:
    """Remove the pid file at exit, unless another server has written its own since."""
    with contextlib.suppress(OSError, ValueError):
        if int(path.read_text(encoding="ascii").strip()) == os.getpid():
            path.unlink()


def cmd_reload(args: argparse.Namespace) -> int:
    load(args.config)  # a bad file exits 2 here, every problem named by its YAML path
    path = pid_file(args)
    pid = _server_pid(path)
    if pid is None:
        return EXIT_NO_SERVER
    try:
        os.kill(pid, signal.SIGHUP)
    except ProcessLookupError:
        print(f"error: no signoff serve is running (stale {path})", file=sys.stderr)
        return EXIT_NO_SERVER
    except PermissionError:
        print(f"error: not allowed to signal the server (pid {pid})", file=sys.stderr)
        return EXIT_NO_SERVER
    print(
        f"asked signoff serve (pid {pid}) to reload {args.config}; its log says what it "
        "applied and what needs a restart"
    )
    return 0


def _server_pid(path: Path) -> int | None:
    """The pid in ``path`` when it is a running ``signoff serve``; else None, said on stderr."""
    try:
        pid = int(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        print(
            f"error: no signoff serve is running for this configuration ({path} not found; "
            "pass --pid-file if the server was started with one)",
            file=sys.stderr,
        )
        return None
    except (OSError, ValueError) as exc:
        print(f"error: cannot read {path}: {exc}", file=sys.stderr)
        return None
    # A pid file left by a server that died may name another process now: on Linux, refuse to
    # signal anything that is not a signoff serve (SIGHUP would end most programs).
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.parent.parent.is_dir() and Path("/proc/self").exists():
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            print(f"error: no signoff serve is running (stale {path})", file=sys.stderr)
            return None
        if b"serve" not in words:
            print(f"error: pid {pid} in {path} is not a signoff serve (stale)", file=sys.stderr)
            return None
    return pid
