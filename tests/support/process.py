"""``signoff`` as child processes: the CLI, and ``signoff serve`` with its log kept in a file."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.waiting import quiet

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def child_env(**extra: str) -> dict[str, str]:
    """The parent's environment without SIGNOFF_* overrides: the config file decides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


async def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``python -m bot.cli ARGS``; returns (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        *args,
        cwd=ROOT,
        env=env or child_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def cli(config: Path, *args: str) -> str:
    """Run a CLI command that must succeed; returns its output."""
    code, out, err = await run_cli(*args, "--config", str(config))
    assert code == 0, f"signoff {' '.join(args)} exited {code}: {err}"
    return out


class Server:
    """``signoff serve`` as a child process; ``env``: extra environment variables for it;
    ``checkout``: the source tree to serve from (another checkout runs its own ``.venv``);
    ``args``: more options for ``signoff serve`` (``--migrate``)."""

    def __init__(
        self,
        config: Path,
        port: int,
        log: Path,
        env: dict[str, str] | None = None,
        checkout: Path = ROOT,
        args: tuple[str, ...] = (),
    ) -> None:
        self.config = config
        self.args = args
        self.checkout = checkout
        self.base = f"http://127.0.0.1:{port}"
        self.log = log
        self.env = dict(env or {})
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, *, ready_path: str = "/readyz") -> None:
        with self.log.open("ab") as out:
            python = sys.executable
            if self.checkout != ROOT:
                python = str(self.checkout / ".venv" / "bin" / "python")
            self.proc = await asyncio.create_subprocess_exec(
                python,
                "-m",
                "bot.cli",
                "serve",
                "--config",
                str(self.config),
                *self.args,
                cwd=self.checkout,
                env=child_env(**self.env),
                stdout=out,
                stderr=out,
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STARTUP_TIMEOUT
        async with aiohttp.ClientSession() as http:
            while True:
                assert self.proc.returncode is None, self.log.read_text()
                try:
                    async with http.get(self.base + ready_path) as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                assert loop.time() < deadline, "server did not start:\n" + self.log.read_text()
                await quiet(0.1)  # a real process is starting

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()

    async def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, then wait; returns the exit code (SIGKILL after ``timeout``)."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                await self.kill()
        return None if self.proc is None else self.proc.returncode


async def call(
    http: aiohttp.ClientSession, method: str, url: str, token: str | None, body: Any = None
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with http.request(method, url, json=body, headers=headers) as resp:
        if resp.content_type == "application/json":
            return resp.status, await resp.json()
        return resp.status, await resp.text()
