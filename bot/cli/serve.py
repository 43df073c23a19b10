"""``signoff serve``: the HTTP service with its workers, on a port it listens on first."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from bot.cli.checks import EXIT_CONFIG, NOT_MIGRATED, add_config, database_state, load
from bot.cli.reload import add_pid_file, pid_file, remove_pid, write_pid

if TYPE_CHECKING:
    import socket

    from engine.assembly import EngineOptions
    from engine.config import AppConfig


def add_parser(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the HTTP service with its workers")
    add_config(serve)
    serve.add_argument("--host", help="listen address (default server.host)")
    serve.add_argument("--port", type=int, help="listen port (default server.port)")
    serve.add_argument(
        "--migrate",
        action="store_true",
        help="upgrade the database to the newest schema first (as `signoff migrate` does)",
    )
    add_pid_file(serve)
    serve.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    text = _read(args.config)  # what SIGHUP (``signoff reload``) compares a new file with
    config = load(args.config)
    host = args.host or config.server.host
    port = args.port or config.server.port
    # Listen first: "serving" and the sign-in link are printed only once the port is ours.
    sock = _listen(host, port)
    by = "--host" if args.host else "server.host (or SIGNOFF_HOST)"
    _refuse_off_loopback(config, sock, by)
    _prepare_database(config, sock, migrate=args.migrate)
    config = _bound(config, host, int(sock.getsockname()[1]))

    import asyncio

    from bot.app import create_app
    from bot.cli.login import local_admin_link
    from bot.hygiene import wants_hsts
    from bot.keys import ENGINE
    from bot.reload import Reloader
    from bot.serving import serve

    app = create_app(config, _engine_options())
    reloader = Reloader(app[ENGINE], text, os.environ, args.config)
    print(
        f"signoff serving on http://{host}:{config.server.port} "
        f"(public URL {config.server.public_url})",
        flush=True,
    )
    if (login := local_admin_link(config)) is not None:
        print(f"sign in to the console (this link works once): {login}", flush=True)
    # On SIGINT/SIGTERM: stop accepting, let in-flight requests finish (shutdown_timeout), then
    # run the cleanup that stops workers at a commit point (bot.serving).
    # On SIGHUP (``signoff reload``): people:, groups:, admins: and approvers: again.
    hsts = wants_hsts(config.server.public_url)
    pids = pid_file(args)
    # A SIGHUP before the loop handles it must not end the server (SIGHUP's default).
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    write_pid(pids)
    try:
        asyncio.run(
            serve(app, sock, hsts=hsts, shutdown_timeout=15.0, on_hangup=reloader.reload_file)
        )
    finally:
        remove_pid(pids)
    return 0


def _read(path: str) -> str:
    from bot.cli.checks import require_config_file

    require_config_file(path)
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except (OSError, UnicodeDecodeError):
        return ""  # ``load`` says why, in its words


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or exit 2 with one line saying what to change."""
    import errno
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        print(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
    try:
        # As asyncio's servers do: a restart may reuse a port whose old connections linger.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            why = "is already in use (another signoff serve?)"
        else:
            why = f"cannot be listened on ({exc.strerror or exc})"
        print(
            f"error: port {port} on {host} {why}: set SIGNOFF_PORT (or server.port in "
            "app.yaml, or --port) to a free port",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_CONFIG) from None
    sock.setblocking(False)
    return sock


def _refuse_off_loopback(config: AppConfig, sock: socket.socket, by: str) -> None:
    """Exit 2 when a channel's section refuses the address actually bound (an unsigned
    development mode needs loopback), whatever chose it (``by``)."""
    from engine.config.channels import bind_problems

    problems = bind_problems(config.channel_sections, str(sock.getsockname()[0]), by)
    if not problems:
        return
    sock.close()
    for problem in problems:
        print(f"config error: {problem}", file=sys.stderr)
    raise SystemExit(EXIT_CONFIG)


def _bound(config: AppConfig, host: str, port: int) -> AppConfig:
    """``config`` with the host and port actually listened on (``--host``/``--port`` win over
    app.yaml), and a public URL that follows them unless ``server.publicUrl`` (or
    ``SIGNOFF_PUBLIC_URL``) set it: otherwise every approval link would name the config's
    port while the service answers on another."""
    from dataclasses import replace

    from engine.config.sections import default_public_url

    server = replace(config.server, host=host, port=port)
    if not server.public_url_set:
        server = replace(server, public_url=default_public_url(host, port))
    return replace(config, server=server)


def _prepare_database(config: AppConfig, sock: socket.socket, *, migrate: bool) -> None:
    """With ``--migrate``, migrate (exit 1 if that fails); otherwise exit 2 with one line when
    the database is not migrated, before anything is served: workers polling a schema that is
    not there would only repeat warnings. An unreachable database does not stop the start (it
    may come back; ``/readyz`` says why until it does)."""
    import asyncio

    if migrate:
        from bot.cli.migrate import migrate as run_migrations

        if (code := run_migrations(config)) != 0:
            sock.close()
            raise SystemExit(code)
        return
    problem, _ = asyncio.run(database_state(config))
    if problem is not None and problem.startswith(NOT_MIGRATED):
        sock.close()
        print(f"error: {problem}; or start with `signoff serve --migrate`", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG)


def _engine_options() -> EngineOptions | None:
    """``SIGNOFF_CLOCK_SKEW_SECONDS`` runs this process with a wrong local clock (fault-injection
    tests: a replica ten minutes off must decide expiry like the others)."""
    skew = os.environ.get("SIGNOFF_CLOCK_SKEW_SECONDS")
    if not skew:
        return None
    from datetime import timedelta

    from engine.assembly import EngineOptions, SystemClock

    return EngineOptions(clock=SystemClock(timedelta(seconds=float(skew))), sync_clock=True)
