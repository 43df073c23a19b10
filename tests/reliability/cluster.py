"""Real ``signoff serve`` processes on one database, for the reliability suite.

A ``Cluster`` writes one ``app.yaml``, migrates, creates API tokens straight in the store (one
CLI process per token would cost a second each), starts one or more replicas on ports of their
own, and reads the database directly to check what the processes did. Everything talks to
127.0.0.1 only; every wait is a bounded poll; ``close`` kills whatever is still running.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from bot.tokens import hash_token, new_token
from engine.adapters.store import Database, SqlStore
from engine.adapters.store import tables as t
from engine.domain.model import Role
from tests.support.process import ROOT, Server, cli, free_port
from tests.support.waiting import quiet

FULL = os.environ.get("SIGNOFF_RELIABILITY_FULL") == "1"
TERMINAL = frozenset({"completed", "failed", "cancelled"})


def size(ci: int, full: int) -> int:
    """The reduced size in CI and everyday runs; the issue's size under ``make reliability``."""
    return full if FULL else ci


@dataclass
class Cluster:
    """Replicas of ``signoff serve`` sharing ``db_url``; ``config_body`` is the YAML after the
    ``database:`` and ``server:`` lines; ``checkout``: the source tree the replicas run."""

    tmp_path: Path
    db_url: str
    config_body: str
    replicas: int = 1
    server: str = "{workers: 8, leaseSeconds: 30, pollSeconds: 0.1}"
    checkout: Path = ROOT
    servers: list[Server] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)
    _db: AsyncEngine | None = None

    def config_path(self, index: int) -> Path:
        return self.tmp_path / f"app-{index}.yaml"

    async def setup(self) -> None:
        # One config per replica: each listens on its own port (publicUrl follows it).
        for index in range(self.replicas):
            port = free_port()
            server = self.server.rstrip("}").rstrip() + f", host: 127.0.0.1, port: {port}}}"
            self.config_path(index).write_text(
                f"database: {{url: '{self.db_url}'}}\nserver: {server}\n" + self.config_body
            )
            self.servers.append(
                Server(
                    self.config_path(index),
                    port,
                    self.tmp_path / f"replica-{index}.log",
                    checkout=self.checkout,
                )
            )
        await cli(self.config_path(0), "migrate")

    async def create_tokens(self, specs: Iterable[tuple[str, Role, str | None]]) -> None:
        db = Database(self.db_url)
        store = SqlStore(db)
        try:
            for name, role, person in specs:
                token = new_token()
                await store.create_token(name, role, person, hash_token(token), datetime.now(UTC))
                self.tokens[name] = token
        finally:
            await db.dispose()

    async def start(self) -> None:
        await asyncio.gather(*(s.start() for s in self.servers))

    async def close(self) -> None:
        await asyncio.gather(*(s.kill() for s in self.servers), return_exceptions=True)
        if self._db is not None:
            await self._db.dispose()

    @property
    def db(self) -> AsyncEngine:
        if self._db is None:
            self._db = create_async_engine(self.db_url, poolclass=NullPool)
        return self._db

    def logs(self) -> str:
        return "\n".join(
            f"--- {s.log.name}\n{s.log.read_text()[-4000:]}" for s in self.servers if s.log.exists()
        )

    # -- reading the database ---------------------------------------------------------------

    async def run_statuses(self) -> dict[str, str]:
        async with self.db.connect() as conn:
            rows = await conn.execute(select(t.runs.c.id, t.runs.c.status))
            return {r.id: r.status for r in rows}

    async def failures(self) -> dict[str, tuple[str | None, list[tuple[str, str | None]]]]:
        """run id -> (error, its journal's last events) for every failed run: what a test
        shows when a run fails that should not have."""
        async with self.db.connect() as conn:
            failed = (
                await conn.execute(
                    select(t.runs.c.id, t.runs.c.error).where(t.runs.c.status == "failed")
                )
            ).all()
        return {run_id: (error, (await self.journal_of(run_id))[-8:]) for run_id, error in failed}

    async def journal_of(self, run_id: str) -> list[tuple[Any, ...]]:
        """A run's journal: (seq, event, step id, data, at) in order."""
        j = t.journal.c
        async with self.db.connect() as conn:
            rows = await conn.execute(
                select(j.seq, j.event, j.step_id, j.data, j.at)
                .where(j.run_id == run_id)
                .order_by(j.seq)
            )
            return [tuple(r) for r in rows]

    async def pending_requests(self) -> dict[str, str]:
        """run id -> its pending takeover request id."""
        async with self.db.connect() as conn:
            rows = await conn.execute(
                select(t.takeover_requests.c.run_id, t.takeover_requests.c.id).where(
                    t.takeover_requests.c.status == "pending"
                )
            )
            return {r.run_id: r.id for r in rows}

    async def journal_counts(self) -> dict[str, Counter[tuple[str, str | None]]]:
        """run id -> Counter of (event, step id)."""
        counts: dict[str, Counter[tuple[str, str | None]]] = {}
        async with self.db.connect() as conn:
            rows = await conn.execute(
                select(
                    t.journal.c.run_id, t.journal.c.event, t.journal.c.step_id, func.count()
                ).group_by(t.journal.c.run_id, t.journal.c.event, t.journal.c.step_id)
            )
            for run_id, event, step, n in rows:
                counts.setdefault(run_id, Counter())[(event, step)] = n
        return counts

    async def ledger_rows(self) -> list[Any]:
        async with self.db.connect() as conn:
            rows = await conn.execute(
                select(
                    t.ledger.c.run_id,
                    t.ledger.c.step_id,
                    t.ledger.c.action,
                    t.ledger.c.idempotency_key,
                    t.ledger.c.at,
                )
            )
            return list(rows)

    async def completed_at(self) -> dict[tuple[str, str], datetime]:
        """(run id, step id) -> when its step_completed event was written."""
        j = t.journal.c
        async with self.db.connect() as conn:
            rows = await conn.execute(
                select(j.run_id, j.step_id, j.at).where(j.event == "step_completed")
            )
            return {(r.run_id, r.step_id): r.at for r in rows}

    async def takeovers(self) -> list[Any]:
        async with self.db.connect() as conn:
            rows = await conn.execute(
                select(
                    t.takeover_requests.c.id,
                    t.takeover_requests.c.run_id,
                    t.takeover_requests.c.status,
                    t.takeover_requests.c.decided_by,
                )
            )
            return list(rows)

    async def outbox_unsent(self) -> list[Any]:
        """Outbox rows not (yet) delivered: (channel, kind, status, attempts, error)."""
        ob = t.outbox.c
        async with self.db.connect() as conn:
            rows = await conn.execute(
                select(ob.channel, ob.kind, ob.status, ob.attempts, ob.error).where(
                    ob.status != "sent"
                )
            )
            return list(rows)

    async def slack_cards(self) -> dict[str, tuple[str, str]]:
        """request id -> (Slack channel id, ts) of its posted card."""
        cm = t.chat_messages.c
        async with self.db.connect() as conn:
            rows = await conn.execute(
                select(cm.request_id, cm.channel, cm.message_ref).where(
                    cm.kind == "card", cm.platform == "slack"
                )
            )
            return {r.request_id: (r.channel.split(":", 1)[1], r.message_ref) for r in rows}

    async def wait_until(self, what: str, check: Any, timeout: float) -> Any:
        """Poll ``await check()`` until it returns something truthy, at most ``timeout`` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            result = await check()
            if result:
                return result
            assert loop.time() < deadline, f"timed out waiting for {what}\n{self.logs()}"
            await quiet(0.2)  # real replicas work meanwhile


@asynccontextmanager
async def approvers_cluster(
    tmp_path: Path, db_url: str, config: str, approvers: Iterable[str], server: str
) -> AsyncIterator[Cluster]:
    """The single SQLite process, or three replicas on PostgreSQL, started, with an agent
    token and an approver token for each of ``approvers`` (named after them)."""
    replicas = 1 if db_url.startswith("sqlite") else 3
    c = Cluster(tmp_path, db_url, config, replicas=replicas, server=server)
    try:
        await c.setup()
        await c.create_tokens(
            [("agent", Role.AGENT, None)] + [(n, Role.APPROVER, n) for n in approvers]
        )
        await c.start()
        yield c
    finally:
        await c.close()


def _socket_inode(local_port: int) -> str | None:
    """The inode of the IPv4 TCP socket bound to 127.0.0.1:``local_port`` (``/proc/net/tcp``)."""
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            host, port = fields[1].split(":")
            if int(port, 16) == local_port and host == "0100007F":
                return fields[9]
    return None


def replica_of_client(cluster: Cluster, client_port: int) -> Server | None:
    """Which replica owns the client socket whose local port is ``client_port``: a fake
    service sees the caller's port, and the test kills exactly the process making the call."""
    inode = _socket_inode(client_port)
    if inode is None:
        return None
    wanted = f"socket:[{inode}]"
    for server in cluster.servers:
        if server.proc is None or server.proc.returncode is not None:
            continue
        fds = Path(f"/proc/{server.proc.pid}/fd")
        try:
            for fd in fds.iterdir():
                try:
                    if os.readlink(fd) == wanted:
                        return server
                except OSError:
                    continue
        except OSError:
            continue
    return None


async def start_runs(
    http: aiohttp.ClientSession,
    cluster: Cluster,
    token: str,
    workflow: str | list[str],
    n: int,
    *,
    parallel: int = 16,
    offset: int = 0,
) -> list[str]:
    """Start ``n`` runs spread over the replicas (and over ``workflow`` when it is a list);
    returns their ids."""
    gate = asyncio.Semaphore(parallel)
    rng = random.Random(n)
    names = [workflow] if isinstance(workflow, str) else workflow

    async def one(i: int) -> str:
        server = cluster.servers[i % len(cluster.servers)]
        async with gate:
            for attempt in range(5):
                try:
                    async with http.post(
                        server.base + "/v1/runs",
                        json={
                            "workflow": names[i % len(names)],
                            "input": {"order": f"o-{i}"},
                            "idempotencyKey": f"start-{i}",
                        },
                        headers={"Authorization": f"Bearer {token}"},
                    ) as resp:
                        body = await resp.json(content_type=None)
                        if resp.status in (200, 201):
                            return str(body["id"])
                        if resp.status < 500 or attempt == 4:
                            raise AssertionError((resp.status, body))
                except (aiohttp.ClientConnectionError, TimeoutError):
                    if attempt == 4:
                        raise
                # The idempotency key makes the retry safe, on this replica or another.
                server = rng.choice(cluster.servers)
                await quiet(0.1 + rng.random() * 0.2)  # a client's back-off
        raise AssertionError("unreachable")

    return list(await asyncio.gather(*(one(offset + i) for i in range(n))))
