"""Decisions per second and release-to-next-step latency with 1, 2 and 3 ``signoff serve``
processes on one PostgreSQL database; print the figures.

    python bench/replicas.py [--db postgresql+asyncpg://postgres@127.0.0.1:5432/test]
                             [--runs 300] [--sample 50] [--replicas 1,2,3] [--rounds 1]
                             [--interleave K] [--against CHECKOUT]

For each replica count, on a scratch database of its own: park ``--runs`` runs of
``approve -> act`` (``act`` calls an HTTP service in this process), then
- decisions per second: grant+release every parked request, 32 at a time, spread over the
  replicas (time until the last decision's response);
- release-to-next-step latency p50/p99: ``--sample`` decisions one at a time, from the grant's
  response (committed) to the ``act`` step's call arriving here. Polling is set to a minute, so
  only LISTEN/NOTIFY can wake the replica that runs the step quickly;
- the bare single-row commit rate of the same database, and decisions/commits;
- CPU milliseconds per decision while the decisions run, per side: the replicas (all of them),
  PostgreSQL (every ``postgres`` process) and this driver (its HTTP client and the ``act``
  service, a bare asyncio protocol: aiohttp's server made the driver's CPU per decision 1.07 ms
  rather than 0.7), and the whole machine's (``/proc/stat``). Their sum against the machine's cores
  bounds the rate any number of replicas can reach here; a machine figure well above the sum
  is CPU of processes that exited meanwhile (PostgreSQL backends of closed connections).
``--rounds K`` measures the replica counts K times, taking turns (1, 2, 3, 1, 2, 3 ...), then
prints each count's median decisions/s and its ratio to one replica's, round by round: a
round's counts ran a minute or two apart, so its ratio is less touched by the machine's speed
changing than a ratio across rounds. ``--interleave K`` keeps every count's cluster running at
once, each with ``(K + 1) * --runs`` runs parked, and decides ``--runs`` of each in K turns
(after one to warm up), one cluster after another: a turn's rows are seconds apart, and the
ratios' median and quartiles are printed (decisions/s and CPU only). ``--against CHECKOUT``
does the same between this checkout's replicas and another's (an earlier commit's worktree with
its ``.venv`` installed), each count's two clusters one right after the other in every turn,
and prints the ratios this / other. Figures are printed, never asserted. Only 127.0.0.1 is
contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp

from bench.sweep import bare_commits, scratch_database
from engine.domain.model import Role
from tests.reliability.cluster import Cluster, start_runs
from tests.support.process import ROOT

DEFAULT_DB = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


class Arrivals:
    """The service the ``act`` step calls: notes when each run's call arrives."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.waiters: dict[str, asyncio.Event] = {}
        self.url = ""

    def arrived(self, idempotency_key: str) -> None:
        run_id = idempotency_key.split(":")[0]
        self.at.setdefault(run_id, time.perf_counter())
        self.waiters.setdefault(run_id, asyncio.Event()).set()


_ANSWER = (
    b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"ok": true}'
)


class ActService(asyncio.Protocol):
    """``POST /act`` over keep-alive HTTP/1.1, answered ``{"ok": true}``: the remote service
    the replicas call, as light as it can be, as it shares the two cores with them (see the
    module's note on the driver's CPU)."""

    def __init__(self, arrivals: Arrivals) -> None:
        self.arrivals = arrivals
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length, key = 0, ""
            for line in self.buffer[:end].decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.lower() == "content-length":
                    length = int(value)
                elif name.lower() == "idempotency-key":
                    key = value.strip()
            if len(self.buffer) < end + 4 + length:
                return  # the body is still coming
            self.buffer = self.buffer[end + 4 + length :]
            self.arrivals.arrived(key)
            assert self.transport is not None
            self.transport.write(_ANSWER)


def config(url: str) -> str:
    return f"""\
people:
  alice: {{email: alice@example.com}}
  bob: {{email: bob@example.com}}
admins: [alice]
connectors:
  remote:
    type: http
    baseUrl: {url}
    actions: {{act: {{kind: write, method: POST, path: /act}}}}
workflows:
  bench:
    nodes:
      - {{id: approve, type: approval, approvers: [bob], channels: [web], timeoutMinutes: 600}}
      - {{id: act, type: connector, connector: remote, action: act, args: {{}}}}
"""


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def cpu_by_side(replica_pids: list[int]) -> dict[str, float]:
    def total(pids: list[int]) -> float:
        found = 0.0
        for pid in pids:
            try:
                found += cpu_seconds(pid)
            except OSError:
                continue  # a backend that exited meanwhile
        return found

    return {
        "machine": machine_busy_seconds(),
        "replicas": total(replica_pids),
        "postgres": total(postgres_pids()),
        "driver": cpu_seconds(os.getpid()),
    }


def machine_busy_seconds() -> float:
    """CPU time all cores have spent busy (neither idle nor waiting for I/O) since boot."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Parked:
    """A cluster of ``signoff serve`` replicas on a scratch database, with runs parked at their
    approval: ``pending`` maps each run to its request."""

    cluster: Cluster
    http: aiohttp.ClientSession
    pending: dict[str, str]
    headers: dict[str, str]

    @property
    def replica_pids(self) -> list[int]:
        return [s.proc.pid for s in self.cluster.servers if s.proc is not None]

    async def grant(self, i: int, run_id: str) -> float:
        """Grant and release ``run_id``'s request through replica ``i`` (modulo); the time of
        the response."""
        server = self.cluster.servers[i % len(self.cluster.servers)]
        async with self.http.post(
            f"{server.base}/v1/runs/{run_id}/takeover/{self.pending[run_id]}/grant",
            json={"release": True},
            headers=self.headers,
        ) as resp:
            assert resp.status == 200, await resp.text()
        return time.perf_counter()

    async def decide(self, ids: list[str]) -> tuple[float, dict[str, float]]:
        """Decide ``ids``, 32 at a time spread over the replicas: decisions per second and CPU
        milliseconds per decision by side."""
        gate = asyncio.Semaphore(32)

        async def gated(i: int, run_id: str) -> float:
            async with gate:
                return await self.grant(i, run_id)

        cpu_before = cpu_by_side(self.replica_pids)
        started = time.perf_counter()
        await asyncio.gather(*(gated(i, r) for i, r in enumerate(ids)))
        rate = len(ids) / (time.perf_counter() - started)
        cpu_after = cpu_by_side(self.replica_pids)
        cpu_ms = {
            side: (cpu_after[side] - cpu_before[side]) * 1000 / len(ids) for side in cpu_after
        }
        return rate, cpu_ms


@contextlib.asynccontextmanager
async def parked_cluster(
    db: str, replicas: int, runs: int, url: str, checkout: Path = ROOT
) -> AsyncIterator[Parked]:
    """``replicas`` replicas of ``checkout`` on a new database of ``db``'s server, ``runs`` runs
    parked."""
    async with scratch_database(db) as db_url:
        with tempfile.TemporaryDirectory(prefix="signoff-replicas-") as tmp:
            cluster = Cluster(
                Path(tmp),
                db_url,
                config(url),
                replicas=replicas,
                server="{workers: 32, leaseSeconds: 30, pollSeconds: 60}",
                checkout=checkout,
            )
            try:
                await cluster.setup()
                await cluster.create_tokens(
                    [("agent", Role.AGENT, None), ("bob", Role.APPROVER, "bob")]
                )
                await cluster.start()
                async with aiohttp.ClientSession(
                    timeout=aiohttp.ClientTimeout(total=60),
                    connector=aiohttp.TCPConnector(limit=64),
                ) as http:
                    await start_runs(http, cluster, cluster.tokens["agent"], "bench", runs)

                    async def parked() -> dict[str, str] | None:
                        pending = await cluster.pending_requests()
                        return pending if len(pending) == runs else None

                    pending = await cluster.wait_until("runs to park", parked, 300)
                    # A live database's tables grow gradually and autovacuum keeps their
                    # statistics (it analyzes a table after 50 changes and 10 %, within a
                    # minute). Tables filled a moment ago have none: PostgreSQL would pick the
                    # (status, expires_at) index over the primary key for a decision's UPDATE
                    # and scan every pending request for each decision.
                    async with cluster.db.connect() as conn:
                        await conn.exec_driver_sql("ANALYZE")
                    headers = {"Authorization": f"Bearer {cluster.tokens['bob']}"}
                    yield Parked(cluster, http, pending, headers)
            finally:
                await cluster.close()


async def measure(
    db: str, replicas: int, runs: int, sample: int, arrivals: Arrivals
) -> dict[str, Any]:
    async with scratch_database(db) as scratch:
        commits = await bare_commits(scratch)
    async with parked_cluster(db, replicas, runs + sample, arrivals.url) as parked:
        ids = sorted(parked.pending)
        timed, bulk = ids[:sample], ids[sample:]
        decisions, cpu_ms = await parked.decide(bulk)
        latencies = []
        for i, run_id in enumerate(timed):
            event = arrivals.waiters.setdefault(run_id, asyncio.Event())
            decided = await parked.grant(i, run_id)
            await asyncio.wait_for(event.wait(), 30)
            latencies.append((arrivals.at[run_id] - decided) * 1000)
    return {
        "decisions": decisions,
        "p50": statistics.median(latencies),
        "p99": pct(latencies, 0.99),
        "commits": commits,
        "cpu_ms": cpu_ms,
    }


async def interleaved(
    db: str, counts: list[int], slices: int, size: int, arrivals: Arrivals
) -> None:
    """Every replica count's cluster kept running at once, each with ``(slices + 1) * size``
    runs parked (one turn to warm up); then ``slices`` turns in which each cluster decides
    ``size`` of its runs, one cluster after another. A turn's rows ran seconds apart, so the
    machine's speed (which drifts by a third within minutes here) touches their ratio least."""
    print(
        f"{len(counts)} clusters at once ({', '.join(map(str, counts))} replicas); "
        f"{slices} turns of {size} decisions (32 at a time) each"
    )
    print(
        f"{'turn':>4} {'replicas':>8} {'decisions/s':>12} {'x one':>6}   CPU ms per decision: "
        f"replicas / postgres / driver = sum; machine"
    )
    async with contextlib.AsyncExitStack() as stack:
        clusters = {}
        for n in counts:
            clusters[n] = await stack.enter_async_context(
                parked_cluster(db, n, (slices + 1) * size, arrivals.url)
            )
        remaining = {n: sorted(c.pending) for n, c in clusters.items()}
        ratios: dict[int, list[float]] = {n: [] for n in counts if n != counts[0]}
        # Turn 0 warms every cluster up (backends preparing their statements) and is not
        # counted; the order alternates, so a steady drift favours no count.
        for turn in range(slices + 1):
            rates: dict[int, float] = {}
            cpus: dict[int, dict[str, float]] = {}
            for n in counts if turn % 2 else counts[::-1]:
                ids, remaining[n] = remaining[n][:size], remaining[n][size:]
                rates[n], cpus[n] = await clusters[n].decide(ids)
            for n in counts:
                x, cpu = rates[n] / rates[counts[0]], cpus[n]
                if n in ratios and turn:
                    ratios[n].append(x)
                print(
                    f"{turn or 'warm':>4} {n:>8} {rates[n]:>12.0f} {x:>6.2f}   {cpu_text(cpu)}",
                    flush=True,
                )
    for n, found in ratios.items():
        print(f"{n} replicas against {counts[0]}: {spread(found)}")


def spread(ratios: list[float]) -> str:
    """Turn ratios as printed: their median, quartiles, extremes and number."""
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return (
        f"median x{statistics.median(ratios):.3f} (quartiles x{quartiles[0]:.2f}-"
        f"x{quartiles[2]:.2f}, min x{min(ratios):.2f}, max x{max(ratios):.2f}, "
        f"{len(ratios)} turns)"
    )


async def against(
    db: str, counts: list[int], slices: int, size: int, arrivals: Arrivals, other: Path
) -> None:
    """This checkout's replicas against ``other``'s (its own ``.venv``; the same schema), every
    cluster running at once: ``slices`` turns in which each decides ``size`` runs, the two
    checkouts' clusters of a count one right after the other, in alternating order. The ratio
    of a turn (this / other) compares figures taken seconds apart."""
    sides = {"this": ROOT, "other": other.resolve()}
    print(f"this checkout ({ROOT}) against {sides['other']}; {slices} turns of {size} decisions")
    print(
        f"{'turn':>4} {'replicas':>8} {'this/s':>7} {'other/s':>7} {'ratio':>6}   CPU ms per "
        f"decision, replicas: this / other"
    )
    async with contextlib.AsyncExitStack() as stack:
        clusters = {}
        for n in counts:
            for side, checkout in sides.items():
                clusters[side, n] = await stack.enter_async_context(
                    parked_cluster(db, n, (slices + 1) * size, arrivals.url, checkout)
                )
        remaining = {key: sorted(c.pending) for key, c in clusters.items()}
        found: dict[int, dict[str, list[float]]] = {
            n: {"decisions/s": [], "CPU per decision": []} for n in counts
        }
        for turn in range(slices + 1):  # turn 0 warms every cluster up and is not counted
            for n in counts:
                rates, cpus = {}, {}
                for side in sides if turn % 2 else list(sides)[::-1]:
                    key = (side, n)
                    ids, remaining[key] = remaining[key][:size], remaining[key][size:]
                    rates[side], cpu = await clusters[key].decide(ids)
                    cpus[side] = cpu["replicas"]
                ratio = rates["this"] / rates["other"]
                if turn:
                    found[n]["decisions/s"].append(ratio)
                    found[n]["CPU per decision"].append(cpus["this"] / cpus["other"])
                print(
                    f"{turn or 'warm':>4} {n:>8} {rates['this']:>7.0f} {rates['other']:>7.0f} "
                    f"{ratio:>6.2f}   {cpus['this']:.2f} / {cpus['other']:.2f}",
                    flush=True,
                )
    for n in counts:
        for what, ratios in found[n].items():
            print(f"{n} replicas, {what} this / other: {spread(ratios)}")


async def reachable(db: str) -> bool:
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    engine = create_async_engine(db, poolclass=NullPool, connect_args={"timeout": 5})
    try:
        async with engine.connect():
            return True
    except Exception as exc:  # any failure to connect means: nothing to measure here
        print(f"PostgreSQL at {db} not reachable ({type(exc).__name__}): skipped")
        return False
    finally:
        await engine.dispose()


async def main(
    db: str,
    runs: int,
    sample: int,
    counts: list[int],
    rounds: int,
    interleave: int,
    other: Path | None = None,
) -> None:
    if not await reachable(db):
        return
    arrivals = Arrivals()
    server = await asyncio.get_running_loop().create_server(
        lambda: ActService(arrivals), "127.0.0.1", 0
    )
    arrivals.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    rates: list[dict[int, float]] = []
    try:
        if other is not None:
            await against(db, counts, max(1, interleave), runs, arrivals, other)
            return
        if interleave:
            await interleaved(db, counts, interleave, runs, arrivals)
            return
        print(f"{runs} decisions (32 at a time) + {sample} timed one at a time, per row")
        print(
            f"{'replicas':>8} {'decisions/s':>12} {'p50 ms':>8} {'p99 ms':>8} "
            f"{'commits/s':>10} {'ratio':>6}   CPU ms per decision: replicas / postgres / "
            f"driver = sum; machine (cores: {os.cpu_count()})"
        )
        for _ in range(rounds):
            rates.append({})
            for n in counts:
                r = await measure(db, n, runs, sample, arrivals)
                rates[-1][n] = r["decisions"]
                print_row(n, r)
    finally:
        server.close()
        await server.wait_closed()
    if rounds > 1:
        print_scaling(rates)


def print_row(n: int, r: dict[str, Any]) -> None:
    print(
        f"{n:>8} {r['decisions']:>12.0f} {r['p50']:>8.1f} {r['p99']:>8.1f} "
        f"{r['commits']:>10.0f} {r['decisions'] / r['commits']:>6.2f}   {cpu_text(r['cpu_ms'])}",
        flush=True,
    )


def cpu_text(cpu: dict[str, float]) -> str:
    """The CPU column: replicas / postgres / driver = sum; machine (ms per decision)."""
    total = cpu["replicas"] + cpu["postgres"] + cpu["driver"]
    return (
        f"{cpu['replicas']:.2f} / {cpu['postgres']:.2f} / {cpu['driver']:.2f} = {total:.2f}; "
        f"{cpu['machine']:.2f}"
    )


def print_scaling(rates: list[dict[int, float]]) -> None:
    """Each replica count's median decisions/s over the rounds, and its ratio to one replica's
    decisions/s of the same round, round by round."""
    print(f"\nmedians of {len(rates)} rounds, and decisions/s against 1 replica's, by round:")
    for n in sorted(rates[0]):
        median = statistics.median(found[n] for found in rates)
        line = f"{n:>8} {median:>12.0f}"
        if n != 1 and 1 in rates[0]:
            ratios = [found[n] / found[1] for found in rates]
            listed = ", ".join(f"x{x:.2f}" for x in ratios)
            line += f"   {listed}; median x{statistics.median(ratios):.2f}"
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=DEFAULT_DB, help="a postgresql+asyncpg:// server URL")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--replicas", default="1,2,3")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure the replica counts this many times, taking turns; then print each"
        " count's median and its ratio to one replica, round by round",
    )
    parser.add_argument(
        "--interleave",
        type=int,
        default=0,
        metavar="K",
        help="keep every replica count's cluster running at once and decide --runs of each"
        " in K turns, one cluster after another (no latency sample, no commit rate)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="CHECKOUT",
        help="compare with another checkout's replicas (its .venv installed), turn by turn as"
        " with --interleave (K turns, default 1)",
    )
    args = parser.parse_args()
    counts = [int(x) for x in args.replicas.split(",")]
    asyncio.run(
        main(
            args.db,
            args.runs,
            args.sample,
            counts,
            max(1, args.rounds),
            args.interleave,
            args.against,
        )
    )
