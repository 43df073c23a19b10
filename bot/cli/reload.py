"""``signoff reload``: apply ``people:`` (and groups, admins, approvers) to a running
``signoff serve`` without a restart.

The command checks the file first with the loader every command uses (a problem is a
``config error:`` line naming its YAML path, exit 2, and the server is not disturbed), then
sends SIGHUP to the server, found through the pid file ``signoff serve`` writes (``--pid-file``;
by default one per configuration file in ``$XDG_RUNTIME_DIR`` or the temporary directory, named
after the file's absolute path, so no directory of the config needs to be writable). SIGHUP
alone does the same (``kill -HUP <pid>``).
The server reads the file again itself and logs what it applied and which changed sections need
a restart (``bot.reload``). A signal, not an HTTP endpoint: it needs no credential beyond being
allowed to signal the process, and nothing on the network can ask for it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from bot.cli.checks import add_config, load

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
        help="the server's process id file (default: one per config file, in "
        "$XDG_RUNTIME_DIR or the temporary directory)",
    )


def pid_file(args: argparse.Namespace) -> Path:
    """``--pid-file``, or the default one of ``--config``."""
    return Path(args.pid_file) if args.pid_file else default_pid_file(args.config)


def default_pid_file(config: str) -> Path:
    """The pid file of the server of ``config``, named after its absolute path."""
    key = hashlib.sha256(os.path.abspath(config).encode()).hexdigest()[:16]
    folder = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(folder) / f"signoff-serve-{key}.pid"


def write_pid(path: Path) -> bool:
    """Record this process as the server of its configuration (a new file, this user's only;
    never through a link someone else left there). False, with a warning, when it cannot be
    written: the server runs all the same, and SIGHUP still reloads it."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(f"{os.getpid()}\n")
    except OSError as exc:
        print(
            f"warning: cannot write {path} ({exc.strerror or exc}): `signoff reload` will not "
            f"find this server; send it SIGHUP (pid {os.getpid()}) to reload",
            file=sys.stderr,
        )
        return False
    return True


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
