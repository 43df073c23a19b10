"""Signoff next to LangGraph and DBOS: one scenario, one run of each, databases on one disk.

    python bench/peers.py [--runs 1000] [--sample 200] [--rounds 1] [--busy K]
                          [--systems signoff-http,signoff,langgraph-async,langgraph,dbos]
                          [--dir DIR] [--against CHECKOUT]

The headline is the first column, ``signoff (HTTP)``: what a user gets, a real ``signoff
serve`` with the server settings a deployment gets by default, driven over HTTP. The engine
called in process (``in-process``) is beside it, for the cost of the HTTP path.

The scenario, for every system: N runs of ``prepare -> wait for a human -> act``. Park them all,
then deliver every approval. Each system runs in a child process of its own (clean RSS and
thread counts) on a database file of its own in one directory (a new one under the temp dir,
or ``--dir``); this parent collects each child's JSON line and prints one table. A child
calls its system from its main thread: a sync API plainly, with no event loop running (DBOS
refuses its sync calls inside one); an asyncio system on a loop that runs all the time on a
thread of its own, as in an asyncio service. Its park and one-at-a-time phases are driven
from inside that loop (no thread hop in what is timed); the other calls are handed to it.

LangGraph and DBOS are not Signoff's dependencies: ``make bench`` (or ``make bench-peers``)
installs them into ``.venv-peers`` from ``bench/peers/requirements.txt`` and runs this script
with that Python. Under a Python without them, a system is skipped with a note (an error when
it was named in ``--systems``).

The systems:
- signoff-http: a real ``signoff serve`` process on its own SQLite file, with the ``server:``
  defaults of ``engine/config`` (workers, lease, poll), driven through the REST API with 64
  requests in flight: ``POST /v1/runs`` to start, ``POST /v1/runs/{id}/takeover/{tkId}/grant``
  with ``{"release": true}`` to decide. ``act`` is a python connector (``note_act``) that writes
  ``run-id time`` to a pipe whose lines wake this driver's loop (it never polls: a polling
  driver took CPU from the server it measured); ``perf_counter`` is CLOCK_MONOTONIC on Linux,
  one clock for both processes.
- signoff: the engine in process, as ``bench/park_resume.py`` drives it (SQLite file, 32
  workers); ``act`` is its ``ActClock`` connector, which notes when it is called.
- langgraph: a ``StateGraph`` prepare -> approve (``interrupt()``) -> act with a
  ``SqliteSaver`` on a file, sync API. A run is parked when ``invoke`` returns at the
  interrupt; ``invoke(Command(resume=...))`` releases it and runs ``act`` in the caller.
- langgraph-async: the same graph on ``AsyncSqliteSaver`` through ``ainvoke``, 64 calls in
  flight (as many as signoff-http's clients).
- dbos: DBOS Transact, SQLite system database, default settings: workflow = step prepare,
  ``DBOS.recv(topic)``, step act; ``DBOS.send`` releases. A parked workflow holds a thread, and
  on SQLite a poller re-checks every waiter once per second (DBOS's default interval).

Figures (printed, never asserted):
- park rate: N runs started the way the burst releases them (signoff-http and
  langgraph-async: 64 starts in flight; in-process signoff: 32; sync APIs: blocking calls
  back to back from one driver), divided by the time until all are parked (Signoff: run
  status ``waiting``; LangGraph: ``invoke`` returned; DBOS: the workflow is registered as a
  ``recv`` waiter). ``--starters K`` starts K at once in every system instead, each its own
  way of taking concurrent callers: Signoff's loop takes their calls concurrently,
  LangGraph's saver serializes threads on its lock, DBOS starts each workflow on a thread of
  its own; ``--starters 1``: every system one after another;
- last start accepted -> all parked: from the last start's answer to every run parked (how far
  a server that answers starts lets its work fall behind them);
- release-to-act p50/p99, one at a time (``--sample`` runs): from the release call to the act
  step's call; the next release only after that;
- resume rate: the other runs released as a burst (as many release calls in flight as
  starts; sync APIs: blocking calls back to back from one driver), runs divided by the
  time from the first release call to the last act call;
- burst p99: in that burst, per run, its release call to its act call;
- CPU ms per run: the CPU time of every process of the system and its driver (signoff-http:
  this driver's and the server's, from /proc), from the first start to the burst's last act,
  divided by N: the budget a run costs on a machine that does other work too;
- RSS bytes per parked run: (RSS after parking - before) / N, after ``gc.collect()`` (for
  signoff-http: the server's RSS, no collection there);
- tasks and threads held while parked: after parking minus before, ``len(asyncio.all_tasks())``
  where the system runs on an asyncio loop here, ``threading.active_count()`` (for
  signoff-http: the server's OS threads from /proc);
- DB bytes per run: the database file(s), with -wal/-shm/-journal, after parking / N.

``--rounds K`` measures every system K times, taking turns (each round on new database
files); the table gives each figure's median over the rounds, and the ratios are also given
round by round with their median. The machine's speed can change by a third within minutes
here: a ratio between systems measured in one round is the steadier figure.

``--against CHECKOUT`` measures each system here and in another checkout (an earlier commit's
worktree with its ``.venv`` installed), ``--rounds`` times, the two sides taking turns in
alternating order, and prints each figure's ratio this / other round by round, its median and
the spread of each side's rounds: a change's before and after.

``PEERS_HTTP_SERVER='{workers: 32, leaseSeconds: 30, pollSeconds: 2.0}'`` in the environment
serves signoff-http with other ``server:`` settings than the defaults.

``--busy K`` runs K busy loops (a process spinning on a core each) beside every measurement:
the figures of a machine that is not idle.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import importlib.util
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Coroutine, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NotRequired, TextIO, TypedDict, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp

from bench.park_resume import WORKFLOW, ActClock, pct, prepare, rss_bytes
from engine.adapters.store import Database, SqlStore
from engine.adapters.store.migrate import upgrade_to_head
from engine.assembly import Engine, EngineOptions
from engine.config import parse_config
from engine.config.sections import ServerConfig
from engine.domain.model import Principal, Role, RunStatus, TakeoverStatus
from tests.reliability.cluster import Cluster

DEFAULT_SYSTEMS = ("signoff-http", "signoff", "langgraph-async", "langgraph", "dbos")
SYSTEMS = DEFAULT_SYSTEMS
# The table's column heads: the HTTP column is what a user gets; the engine in process is not.
HEADS = {"signoff-http": "signoff (HTTP)", "signoff": "in-process"}
LANGGRAPH = ("langgraph", "langgraph.checkpoint.sqlite")
NEEDS = {"langgraph": LANGGRAPH, "langgraph-async": (*LANGGRAPH, "aiosqlite"), "dbos": ("dbos",)}
BURST_IN_FLIGHT = 32  # release calls in flight during a Signoff burst
SERVER = "{workers: 32, leaseSeconds: 60, pollSeconds: 0.5}"  # the in-process engine's
# signoff-http serves what a deployment gets: the server section's defaults (engine/config).
_DEFAULTS = ServerConfig()
HTTP_SERVER = os.environ.get("PEERS_HTTP_SERVER") or (
    f"{{workers: {_DEFAULTS.workers}, leaseSeconds: {_DEFAULTS.lease_seconds}, "
    f"pollSeconds: {_DEFAULTS.poll_seconds}}}"
)
HTTP_IN_FLIGHT = 64  # requests in flight from signoff-http's clients, langgraph-async's callers
PEOPLE = "people: {ann: {email: ann@example.com}}\n"
ACT_LOG_ENV = "PEERS_ACT_LOG"
TOPIC = "approval"
SETTLE_SECONDS = 0.3  # after the last run parks, before RSS and threads are read
POLL_SECONDS = 0.0005
T = TypeVar("T")

# signoff-http: the same workflow, its act connector the python function below.
HTTP_WORKFLOW = WORKFLOW.replace(
    'act: {type: python, function: "bench.park_resume:prepare"',
    'act: {type: python, function: "bench.peers:note_act"',
)
assert HTTP_WORKFLOW != WORKFLOW, "bench/park_resume.py's act connector line changed"


@functools.cache
def _act_log() -> TextIO:
    return open(os.environ[ACT_LOG_ENV], "a", buffering=1)  # line-buffered: one write a call


def note_act(action: str, args: dict[str, Any], idempotency_key: str) -> dict[str, bool]:
    """signoff-http's act step, called inside the server: note ``run-id perf_counter``."""
    at = time.perf_counter()
    _act_log().write(f"{idempotency_key.split(':')[0]} {at}\n")
    return {"ok": True}


def files_size(first: Path) -> int:
    """Bytes of a database file and its companions (-wal, -shm, -journal)."""
    return sum(p.stat().st_size for p in first.parent.glob(first.name + "*") if p.is_file())


@dataclass
class Footprint:
    rss: int
    threads: int
    tasks: int | None  # None: the system does not run on an asyncio loop


class Arm:
    """One system under test, driven by plain calls from this thread. Keys name runs;
    ``acted`` maps a key to when its act step was called (``perf_counter``)."""

    name = ""
    in_flight = 1  # runs started (and released, in the burst) at once: a sync API's one caller

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def setup(self) -> None: ...

    def start(self, i: int) -> str:
        raise NotImplementedError

    def parked(self) -> int:
        raise NotImplementedError

    def park_all(self, runs: int, starters: int) -> tuple[list[str], float, float]:
        return park(self, runs, starters)

    def one_by_one(self, keys: list[str]) -> list[float]:
        return one_at_a_time(self, keys)

    def after_park(self, runs: int) -> None:
        """Whatever the releases need to know once every run is parked."""

    def release(self, key: str) -> None:
        raise NotImplementedError

    def release_all(self, keys: list[str], released: dict[str, float]) -> None:
        """The burst: back to back from this driver, noting when each release call began."""
        for key in keys:
            released[key] = time.perf_counter()
            self.release(key)

    def acted(self) -> Mapping[str, float]:
        raise NotImplementedError

    def pause(self, seconds: float) -> None:
        time.sleep(seconds)

    def footprint(self) -> Footprint:
        gc.collect()
        return Footprint(rss_bytes(), threading.active_count(), None)

    def db_bytes(self) -> int:
        raise NotImplementedError

    def cpu_seconds(self) -> float:
        """CPU time used so far by the system and its driver (all their threads)."""
        return time.process_time()

    def close(self) -> None: ...


class LoopArm(Arm):
    """A system on an asyncio loop in this process. The loop runs all the time on a thread of
    its own, as in an asyncio service; the driver's calls go to it and wait for their result.
    Parking has ``BURST_IN_FLIGHT`` starts in flight, a burst as many releases."""

    in_flight = BURST_IN_FLIGHT

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="loop", daemon=True)
        self.thread.start()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()

    async def astart(self, i: int) -> str:
        raise NotImplementedError

    async def aparked(self) -> int:
        raise NotImplementedError

    async def release_one(self, key: str) -> None:
        raise NotImplementedError

    def start(self, i: int) -> str:
        return self.run(self.astart(i))

    def parked(self) -> int:
        return self.run(self.aparked())

    def release(self, key: str) -> None:
        self.run(self.release_one(key))

    # The timed phases run inside the loop, as an asyncio caller of the system would: no
    # thread hop between the driver and the system in what is measured.

    def park_all(self, runs: int, starters: int) -> tuple[list[str], float, float]:
        async def park_them() -> tuple[list[str], float, float]:
            started = time.perf_counter()
            numbers = iter(range(runs))
            keys: dict[int, str] = {}

            async def starter() -> None:
                for i in numbers:
                    keys[i] = await self.astart(i)

            await asyncio.gather(*(starter() for _ in range(starters)))
            accepted = time.perf_counter()
            while await self.aparked() < runs:
                await asyncio.sleep(0.02)
            done = time.perf_counter()
            return [keys[i] for i in range(runs)], done - started, done - accepted

        return self.run(park_them())

    def one_by_one(self, keys: list[str]) -> list[float]:
        async def release_each() -> list[float]:
            latencies = []
            for key in keys:
                released = time.perf_counter()
                await self.release_one(key)
                while key not in self.acted():
                    await asyncio.sleep(POLL_SECONDS)
                latencies.append((self.acted()[key] - released) * 1000)
            return latencies

        return self.run(release_each())

    def release_all(self, keys: list[str], released: dict[str, float]) -> None:
        queue = iter(keys)

        async def releaser() -> None:
            for key in queue:
                released[key] = time.perf_counter()
                await self.release_one(key)

        async def all_of_them() -> None:
            await asyncio.gather(*(releaser() for _ in range(self.in_flight)))

        self.run(all_of_them())

    def footprint(self) -> Footprint:
        async def tasks() -> int:
            # The fewest of a few looks 10 ms apart: the engine's loops come and go with
            # short-lived tasks of their own (one counted before parking but gone after
            # showed as -1 held).
            seen = []
            for _ in range(5):
                seen.append(len(asyncio.all_tasks()) - 1)  # not this one
                await asyncio.sleep(0.01)
            return min(seen)

        found = super().footprint()
        found.tasks = self.run(tasks())
        return found

    async def aclose(self) -> None: ...

    def close(self) -> None:
        self.run(self.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


# -- Signoff ------------------------------------------------------------------------------------


class SignoffArm(LoopArm):
    """The engine in this process, its API called directly."""

    name = "signoff"
    agent = Principal(name="token:bench", role=Role.AGENT, token="bench")
    approver = Principal(name="ann", role=Role.APPROVER, person="ann")

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.db_path = directory / f"{self.name}.db"
        self.url = f"sqlite+aiosqlite:///{self.db_path}"
        self.requests: dict[str, str] = {}
        self.clock = ActClock()

    def setup(self) -> None:
        self.run(upgrade_to_head(self.url))
        text = f"database: {{url: '{self.url}'}}\nserver: {SERVER}\n{PEOPLE}{WORKFLOW}"
        self.engine = Engine(
            parse_config(text, {}), EngineOptions(extra_connectors={"act": self.clock})
        )
        self.run(self.engine.start())
        self.store: SqlStore = self.engine.store

    async def astart(self, i: int) -> str:
        run, _ = await self.engine.runs.start_run("bench", {"n": i}, self.agent)
        return run.id

    async def aparked(self) -> int:
        return await self.store.count_runs(RunStatus.WAITING)

    def after_park(self, runs: int) -> None:
        pending = self.run(
            self.store.list_takeovers(statuses=[TakeoverStatus.PENDING], limit=runs + 10)
        )
        self.requests = {r.run_id: r.id for r in pending}

    async def release_one(self, key: str) -> None:
        await self.engine.approvals.grant(self.requests[key], self.approver, release=True)

    def acted(self) -> Mapping[str, float]:
        return self.clock.called

    def db_bytes(self) -> int:
        return files_size(self.db_path)

    async def aclose(self) -> None:
        await self.engine.stop()


class ActPipe:
    """The pipe ``note_act`` writes to: run id -> when its act step was called. The driver's
    loop is woken by each line (no polling: a driver that polled would take CPU from the
    server it measures, as a LangGraph caller waiting on ``ainvoke`` takes none). The driver
    holds the pipe open for writing too, so that it never reads an end of file."""

    def __init__(self, path: Path, loop: asyncio.AbstractEventLoop) -> None:
        os.mkfifo(path)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.keep = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        self.partial = b""
        self.at: dict[str, float] = {}
        self.waiting: dict[str, asyncio.Event] = {}
        self.loop = loop
        loop.call_soon_threadsafe(loop.add_reader, self.fd, self.drain)

    def drain(self) -> None:
        """On the loop: read every line written so far, and wake whoever waits for one."""
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            lines = (self.partial + chunk).split(b"\n")
            self.partial = lines.pop()
            for line in lines:
                run_id, at = line.decode().split()
                self.at.setdefault(run_id, float(at))
                if run_id in self.waiting:
                    self.waiting.pop(run_id).set()

    def close(self) -> None:
        self.loop.remove_reader(self.fd)
        os.close(self.fd)
        os.close(self.keep)


def process_footprint(pid: int) -> Footprint:
    """RSS and OS threads of another process, from /proc."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return Footprint(int(fields["VmRSS"].split()[0]) * 1024, int(fields["Threads"]), None)


class SignoffHttpArm(SignoffArm):
    """``signoff serve`` in a child process, driven through its REST API; counts and pending
    requests are read from its database."""

    name = "signoff-http"
    in_flight = HTTP_IN_FLIGHT

    def setup(self) -> None:
        act_log = self.dir / f"{self.name}.acts"
        os.environ[ACT_LOG_ENV] = str(act_log)  # the server inherits it
        self.acts = ActPipe(act_log, self.loop)
        files = self.dir / f"{self.name}-server"
        files.mkdir(exist_ok=True)
        self.cluster = Cluster(files, self.url, PEOPLE + HTTP_WORKFLOW, server=HTTP_SERVER)
        self.run(self.start_server())
        self.base = self.cluster.servers[0].base
        self.database = Database(self.url)
        self.store = SqlStore(self.database)

    async def start_server(self) -> None:
        await self.cluster.setup()
        await self.cluster.create_tokens(
            [("agent", Role.AGENT, None), ("ann", Role.APPROVER, "ann")]
        )
        await self.cluster.start()
        self.http = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=120),
            connector=aiohttp.TCPConnector(limit=HTTP_IN_FLIGHT),
        )

    async def post(self, path: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.cluster.tokens[token]}"}
        async with self.http.post(self.base + path, json=body, headers=headers) as resp:
            found: dict[str, Any] = await resp.json()
            if resp.status not in (200, 201):
                raise RuntimeError(f"POST {path}: {resp.status} {found}")
            return found

    async def astart(self, i: int) -> str:
        run = await self.post("/v1/runs", "agent", {"workflow": "bench", "input": {"n": i}})
        return str(run["id"])

    async def release_one(self, key: str) -> None:
        path = f"/v1/runs/{key}/takeover/{self.requests[key]}/grant"
        await self.post(path, "ann", {"release": True})

    def acted(self) -> Mapping[str, float]:
        return self.acts.at

    def one_by_one(self, keys: list[str]) -> list[float]:
        async def release_each() -> list[float]:
            latencies = []
            for key in keys:
                acted = self.acts.waiting[key] = asyncio.Event()
                released = time.perf_counter()
                await self.release_one(key)
                if key not in self.acts.at:
                    await acted.wait()  # woken by the pipe, as the line arrives
                latencies.append((self.acts.at[key] - released) * 1000)
            return latencies

        return self.run(release_each())

    def footprint(self) -> Footprint:
        server = self.cluster.servers[0].proc
        assert server is not None
        return process_footprint(server.pid)

    def cpu_seconds(self) -> float:
        """The driver's CPU time and the server's: the budget a request costs on the machine."""
        server = self.cluster.servers[0].proc
        assert server is not None
        fields = Path(f"/proc/{server.pid}/stat").read_text().rpartition(")")[2].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        return time.process_time() + ticks / os.sysconf("SC_CLK_TCK")

    async def aclose(self) -> None:
        await self.http.close()
        await self.database.dispose()
        await self.cluster.close()
        self.acts.close()


# -- LangGraph ----------------------------------------------------------------------------------


class State(TypedDict):
    """The LangGraph run's state."""

    n: int
    approval: NotRequired[str]


def langgraph_app(checkpointer: Any, acted: dict[str, float]) -> Any:
    """prepare -> approve (interrupt) -> act, compiled with ``checkpointer``."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def prepare_node(state: State) -> dict[str, int]:
        return prepare(state["n"])

    def approve_node(state: State) -> dict[str, str]:
        return {"approval": interrupt({"act on": state["n"]})}

    def act_node(state: State) -> dict[str, int]:
        acted[str(state["n"])] = time.perf_counter()
        return {}

    graph = StateGraph(State)
    graph.add_node("prepare", prepare_node)
    graph.add_node("approve", approve_node)
    graph.add_node("act", act_node)
    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "approve")
    graph.add_edge("approve", "act")
    graph.add_edge("act", END)
    return graph.compile(checkpointer=checkpointer)


def thread_config(key: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": key}}


class LangGraphArm(Arm):
    name = "langgraph"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.db_path = directory / f"{self.name}.sqlite"
        self.at: dict[str, float] = {}
        self.count = 0
        self.counting = threading.Lock()  # --starters: several threads park at once
        self.exit = contextlib.ExitStack()

    def setup(self) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = self.exit.enter_context(SqliteSaver.from_conn_string(str(self.db_path)))
        self.app = langgraph_app(saver, self.at)

    def start(self, i: int) -> str:
        result = self.app.invoke({"n": i}, thread_config(str(i)))
        assert "__interrupt__" in result, result
        with self.counting:
            self.count += 1
        return str(i)

    def parked(self) -> int:
        return self.count

    def release(self, key: str) -> None:
        from langgraph.types import Command

        self.app.invoke(Command(resume="approved"), thread_config(key))

    def acted(self) -> Mapping[str, float]:
        return self.at

    def db_bytes(self) -> int:
        return files_size(self.db_path)

    def close(self) -> None:
        self.exit.close()


class LangGraphAsyncArm(LoopArm, LangGraphArm):
    """The same graph on ``AsyncSqliteSaver`` (aiosqlite) through ``ainvoke``."""

    name = "langgraph-async"
    in_flight = HTTP_IN_FLIGHT

    def setup(self) -> None:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async def open_saver() -> Any:
            return await self.exits.enter_async_context(
                AsyncSqliteSaver.from_conn_string(str(self.db_path))
            )

        self.exits = contextlib.AsyncExitStack()
        self.app = langgraph_app(self.run(open_saver()), self.at)

    async def astart(self, i: int) -> str:
        result = await self.app.ainvoke({"n": i}, thread_config(str(i)))
        assert "__interrupt__" in result, result
        self.count += 1
        return str(i)

    async def aparked(self) -> int:
        return self.count

    async def release_one(self, key: str) -> None:
        from langgraph.types import Command

        await self.app.ainvoke(Command(resume="approved"), thread_config(key))

    async def aclose(self) -> None:
        await self.exits.aclose()


# -- DBOS ---------------------------------------------------------------------------------------


def dbos_flow(dbos: Any, acted: dict[str, float]) -> Callable[[int], Any]:
    """Register step prepare, recv, step act as a DBOS workflow; returns it."""

    def act(n: int) -> int:
        acted[dbos.workflow_id] = time.perf_counter()
        return n

    prepare_step = dbos.step()(prepare)
    act_step = dbos.step()(act)

    def flow(n: int) -> Any:
        prepare_step(n)
        decision = dbos.recv(TOPIC, timeout_seconds=86_400)
        act_step(n)
        return decision

    registered: Callable[[int], Any] = dbos.workflow()(flow)
    return registered


class DbosArm(Arm):
    name = "dbos"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.db_path = directory / "dbos.sqlite"
        self.at: dict[str, float] = {}

    def setup(self) -> None:
        from dbos import DBOS, _dbos

        DBOS(config={"name": "signoff-peers", "system_database_url": f"sqlite:///{self.db_path}"})
        self.dbos = DBOS
        self.flow = dbos_flow(DBOS, self.at)
        DBOS.launch()
        # DBOS's own registry of workflows blocked in recv (not public API; pinned version).
        self.waiters = _dbos._get_dbos_instance()._sys_db.notifications_map

    def start(self, i: int) -> str:
        return str(self.dbos.start_workflow(self.flow, i).get_workflow_id())

    def parked(self) -> int:
        return len(self.waiters.snapshot())

    def release(self, key: str) -> None:
        self.dbos.send(key, "approved", TOPIC)

    def acted(self) -> Mapping[str, float]:
        return self.at

    def db_bytes(self) -> int:
        return files_size(self.db_path)

    def close(self) -> None:
        self.dbos.destroy()


ARMS: dict[str, type[Arm]] = {
    "signoff": SignoffArm,
    "signoff-http": SignoffHttpArm,
    "langgraph": LangGraphArm,
    "langgraph-async": LangGraphAsyncArm,
    "dbos": DbosArm,
}


# -- the measurement (in the child) -------------------------------------------------------------


@dataclass
class Result:
    system: str
    runs: int
    starters: int  # runs started at once while parking
    park_rate: float
    parked_behind: float  # seconds from the last start accepted to every run parked
    resume_rate: float
    p50_ms: float
    p99_ms: float
    burst_p99_ms: float
    cpu_ms_per_run: float  # CPU time of system and driver, parking to the burst's end, per run
    rss_per_run: float
    tasks_held: int | None
    threads_held: int
    db_bytes_per_run: float
    seconds: float  # the child's whole measurement


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def poll(arm: Arm, done: Callable[[], bool], every: float, timeout: float, what: str) -> None:
    deadline = time.perf_counter() + timeout
    while not done():
        if time.perf_counter() > deadline:
            raise SystemExit(f"{arm.name}: timed out after {timeout:.0f} s waiting for {what}")
        arm.pause(every)


def park(arm: Arm, runs: int, starters: int) -> tuple[list[str], float, float]:
    """Start ``runs`` runs, one after another (``starters`` 1) or from that many threads at
    once, wait until all are parked; keys, seconds, and seconds from the last start accepted
    to all parked."""
    started = time.perf_counter()
    if starters == 1:
        keys = [arm.start(i) for i in range(runs)]
    else:
        with ThreadPoolExecutor(starters, thread_name_prefix="starter") as pool:
            keys = list(pool.map(arm.start, range(runs)))
    accepted = time.perf_counter()
    log(f"{arm.name}: {runs} started in {accepted - started:.1f} s")
    poll(arm, lambda: arm.parked() >= runs, 0.02, max(3600, runs), "the runs to park")
    done = time.perf_counter()
    return keys, done - started, done - accepted


def until_acted(arm: Arm, count: int, timeout: float) -> Mapping[str, float]:
    """Wait until ``count`` runs have called act."""
    poll(arm, lambda: len(arm.acted()) >= count, POLL_SECONDS, timeout, f"{count} acts")
    return arm.acted()


def one_at_a_time(arm: Arm, keys: list[str]) -> list[float]:
    """Release each run, wait for its act; milliseconds from the release call to act."""
    latencies = []
    for done, key in enumerate(keys, 1):
        released = time.perf_counter()
        arm.release(key)
        acted = until_acted(arm, done, timeout=120)
        latencies.append((acted[key] - released) * 1000)
    return latencies


def burst(arm: Arm, keys: list[str], already: int) -> tuple[float, list[float]]:
    """Release every run in ``keys`` as one burst; seconds from the first release call to the
    last act, and each run's release-to-act milliseconds."""
    released: dict[str, float] = {}
    started = time.perf_counter()
    arm.release_all(keys, released)
    log(f"{arm.name}: {len(keys)} released in {time.perf_counter() - started:.1f} s")
    acted = until_acted(arm, already + len(keys), timeout=max(3600, len(keys)))
    last = max(acted[k] for k in keys)
    return last - started, [(acted[k] - released[k]) * 1000 for k in keys]


def measure(system: str, directory: Path, runs: int, sample: int, starters: int | None) -> Result:
    arm = ARMS[system](directory)
    starters = starters or arm.in_flight
    began = time.perf_counter()
    arm.setup()
    try:
        arm.pause(0.2)
        before = arm.footprint()
        cpu_before = arm.cpu_seconds()
        keys, park_seconds, behind = arm.park_all(runs, starters)
        log(f"{system}: {runs} parked in {park_seconds:.1f} s")
        arm.pause(SETTLE_SECONDS)
        after = arm.footprint()
        db_bytes = arm.db_bytes()
        arm.after_park(runs)
        latencies = arm.one_by_one(keys[:sample])
        log(f"{system}: {sample} released one at a time")
        resume_seconds, burst_ms = burst(arm, keys[sample:], sample)
        cpu_seconds = arm.cpu_seconds() - cpu_before
        log(f"{system}: burst of {runs - sample} resumed in {resume_seconds:.1f} s")
    finally:
        arm.close()
    tasks = None if after.tasks is None or before.tasks is None else after.tasks - before.tasks
    return Result(
        system=system,
        runs=runs,
        starters=starters,
        park_rate=runs / park_seconds,
        parked_behind=behind,
        resume_rate=(runs - sample) / resume_seconds,
        p50_ms=statistics.median(latencies),
        p99_ms=pct(latencies, 99),
        burst_p99_ms=pct(burst_ms, 99),
        cpu_ms_per_run=cpu_seconds * 1000 / runs,
        rss_per_run=(after.rss - before.rss) / runs,
        tasks_held=tasks,
        threads_held=after.threads - before.threads,
        db_bytes_per_run=db_bytes / runs,
        seconds=time.perf_counter() - began,
    )


def child(system: str, directory: Path, runs: int, sample: int, starters: int | None) -> None:
    """Measure one system; print its result as one JSON line. Exits without joining threads:
    after a failure, a peer's parked runs would keep the process alive."""
    try:
        print(json.dumps(asdict(measure(system, directory, runs, sample, starters))), flush=True)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


# -- the parent: one child per system, one table ------------------------------------------------


def importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def missing_modules(system: str) -> list[str]:
    return [m for m in NEEDS.get(system, ()) if not importable(m)]


def choose(asked: str | None) -> list[str]:
    """The systems to run: the ones asked for (all must be importable), or every importable."""
    wanted = asked.split(",") if asked else list(DEFAULT_SYSTEMS)
    unknown = [s for s in wanted if s not in SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown system(s) {', '.join(unknown)}; known: {', '.join(SYSTEMS)}")
    chosen = []
    for system in wanted:
        missing = missing_modules(system)
        if not missing:
            chosen.append(system)
            continue
        note = (
            f"{system}: module(s) {', '.join(missing)} not installed in {sys.executable}; "
            "`make bench-peers` (or `make bench`) installs them into .venv-peers from "
            "bench/peers/requirements.txt and runs this script with .venv-peers/bin/python"
        )
        if asked:
            raise SystemExit(note)
        print(f"skipped {note}", file=sys.stderr)
    return chosen


def run_child(
    system: str,
    directory: Path,
    runs: int,
    sample: int,
    starters: int | None,
    checkout: Path | None = None,
) -> Result | None:
    """One system measured in a child process: this checkout's, or ``checkout``'s (its own
    ``.venv`` and ``bench/peers.py``)."""
    side = "" if checkout is None else f"-{checkout.name}"
    log_path = directory / f"{system}{side}.log"
    print(f"== {system}{side}: {runs} runs (log: {log_path})", flush=True)
    python, script = sys.executable, __file__
    if checkout is not None:
        python, script = str(checkout / ".venv/bin/python"), str(checkout / "bench/peers.py")
    with log_path.open("w") as err:
        done = subprocess.run(
            [
                python,
                script,
                "--child",
                system,
                "--runs",
                str(runs),
                "--sample",
                str(sample),
                "--dir",
                str(directory),
                *(["--starters", str(starters)] if starters else []),
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            check=False,
        )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = "\n".join(log_path.read_text().splitlines()[-30:])
        print(f"{system} failed (exit {done.returncode}):\n{tail}", flush=True)
        return None
    result = Result(**json.loads(lines[-1]))
    print(f"   done in {result.seconds:.0f} s", flush=True)
    return result


def number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return f"{value:,.{digits}f}"


ROWS: list[tuple[str, Callable[[Result], str]]] = [
    ("runs started at once while parking", lambda r: number(r.starters)),
    ("park rate (runs/s)", lambda r: number(r.park_rate)),
    ("last start accepted -> all parked (s)", lambda r: number(r.parked_behind, 2)),
    ("resume rate, burst (runs/s)", lambda r: number(r.resume_rate)),
    ("release-to-act p50, one at a time (ms)", lambda r: number(r.p50_ms, 2)),
    ("release-to-act p99, one at a time (ms)", lambda r: number(r.p99_ms, 2)),
    ("release-to-act p99, burst (ms)", lambda r: number(r.burst_p99_ms, 1)),
    ("CPU ms per run, park to resumed (all processes)", lambda r: number(r.cpu_ms_per_run, 2)),
    ("RSS bytes per parked run", lambda r: number(r.rss_per_run)),
    ("asyncio tasks held while parked", lambda r: number(r.tasks_held)),
    ("threads held while parked", lambda r: number(r.threads_held)),
    ("DB bytes on disk per run", lambda r: number(r.db_bytes_per_run)),
    ("child wall time (s)", lambda r: number(r.seconds)),
]


def print_table(results: list[Result], sample: int) -> None:
    width = max(len(label) for label, _ in ROWS) + 2
    runs = results[0].runs
    print(f"\n{runs} runs per system; one-at-a-time sample {sample}, burst {runs - sample}")
    print("figure".ljust(width) + "".join(f"{HEADS.get(r.system, r.system):>16}" for r in results))
    for label, cell in ROWS:
        print(label.ljust(width) + "".join(f"{cell(r):>16}" for r in results))
    by_name = {r.system: r for r in results}
    for ours in ("signoff", "signoff-http"):
        for peer in ("langgraph", "langgraph-async", "dbos"):
            if ours in by_name and peer in by_name:
                a, b = by_name[ours], by_name[peer]
                print(
                    f"{ours}/{peer}: park rate x{a.park_rate / b.park_rate:.2f}, "
                    f"resume rate x{a.resume_rate / b.resume_rate:.2f}, "
                    f"release-to-act p50 x{a.p50_ms / b.p50_ms:.2f}"
                )


def median_result(results: list[Result]) -> Result:
    """One system's rounds as one result: each figure the median of its rounds'."""

    def mid(values: list[Any]) -> Any:
        return None if None in values else statistics.median(values)

    first = results[0]
    figures = {
        name: mid([getattr(r, name) for r in results])
        for name in asdict(first)
        if name not in ("system", "runs", "starters")
    }
    return Result(system=first.system, runs=first.runs, starters=first.starters, **figures)


def print_rounds(rounds: list[list[Result]]) -> None:
    """Each pair's ratios round by round: the systems of one round ran minutes apart, so a
    round's ratio is less touched by the machine's speed changing than ratios across rounds."""
    print(f"\nratios round by round ({len(rounds)} rounds), and their median:")
    for ours in ("signoff", "signoff-http"):
        for peer in ("langgraph", "langgraph-async", "dbos"):
            pairs = [
                (by[ours], by[peer])
                for by in ({r.system: r for r in results} for results in rounds)
                if ours in by and peer in by
            ]
            if not pairs:
                continue
            for figure in ("park_rate", "resume_rate", "p50_ms"):
                ratios = [getattr(a, figure) / getattr(b, figure) for a, b in pairs]
                listed = ", ".join(f"x{x:.2f}" for x in ratios)
                print(
                    f"{ours}/{peer} {figure.replace('_', ' ')}: {listed};"
                    f" median x{statistics.median(ratios):.2f}"
                )


AGAINST_FIGURES = ("park_rate", "resume_rate", "p50_ms", "p99_ms", "burst_p99_ms", "cpu_ms_per_run")


def against(
    systems: list[str], other: Path, directory: Path, runs: int, sample: int, rounds: int,
    starters: int | None,
) -> None:  # fmt: skip
    """Each system of this checkout against the same system of ``other`` (an earlier commit's
    worktree with its ``.venv`` installed): ``rounds`` rounds, the two sides one right after
    the other in alternating order, then each figure's ratio this / other round by round,
    its median, and the spread of each side's rounds (max / min - 1)."""
    for system in systems:
        found: dict[str, list[Result]] = {"this": [], "other": []}
        for turn in range(rounds):
            where = directory / f"{system}-round-{turn + 1}"
            where.mkdir()
            sides = [("this", None), ("other", other)]
            for side, checkout in sides if turn % 2 == 0 else sides[::-1]:
                result = run_child(system, where, runs, sample, starters, checkout)
                if result is None:
                    raise SystemExit(f"kept {directory} for its logs")
                found[side].append(result)
        print(f"\n{system}: this checkout / {other}, {rounds} rounds of {runs} runs")
        for figure in AGAINST_FIGURES:
            mine = [getattr(r, figure) for r in found["this"]]
            theirs = [getattr(r, figure) for r in found["other"]]
            ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
            listed = " ".join(f"x{x:.2f}" for x in ratios)
            print(
                f"{figure:<13} {listed}  median x{statistics.median(ratios):.2f};"
                f" spread of rounds: this {max(mine) / min(mine) - 1:.0%},"
                f" other {max(theirs) / min(theirs) - 1:.0%}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument(
        "--sample",
        type=int,
        default=200,
        help="runs released one at a time (at most half of --runs)",
    )
    parser.add_argument(
        "--systems",
        help=f"comma-separated, of {','.join(SYSTEMS)} (default:"
        f" those of {','.join(DEFAULT_SYSTEMS)} whose packages are installed)",
    )
    parser.add_argument(
        "--dir",
        help="a directory on the disk to measure (default: the temp"
        " dir); a new directory inside it holds the databases and"
        " is removed afterwards unless a system failed",
    )
    parser.add_argument(
        "--starters",
        type=int,
        help="runs every system starts at once while parking (1: one after another; default:"
        f" {BURST_IN_FLIGHT} in flight in an asyncio system, one caller of a sync API, as in"
        " the burst)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every system this many times, the systems taking turns (round 1: each"
        " system once, then round 2 ...); the table gives each figure's median",
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="CHECKOUT",
        help="measure each system here and in CHECKOUT (an earlier commit's worktree with its"
        " .venv installed), --rounds times in alternating order, and print the ratios",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="K",
        help="K busy loops (processes spinning on a core) run beside every measurement:"
        " a machine that is not idle",
    )
    parser.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sample = max(1, min(args.sample, args.runs // 2))
    if args.child:
        child(args.child, Path(args.dir), args.runs, sample, args.starters)
        return
    systems = choose(args.systems)
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="signoff-peers-", dir=args.dir))
    print(f"databases in {directory}", flush=True)
    with busy_loops(args.busy):
        compare(args, systems, directory, sample)


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` processes that spin on a core each, for as long as the block runs."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    if count:
        print(f"{count} busy loop(s) beside every measurement", flush=True)
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()


def compare(args: argparse.Namespace, systems: list[str], directory: Path, sample: int) -> None:
    if args.against is not None:
        against(systems, args.against.resolve(), directory, args.runs, sample,
                max(1, args.rounds), args.starters)  # fmt: skip
        shutil.rmtree(directory, ignore_errors=True)
        return
    rounds: list[list[Result]] = []
    for turn in range(1, max(1, args.rounds) + 1):
        where = directory if args.rounds <= 1 else directory / f"round-{turn}"
        where.mkdir(exist_ok=True)
        if args.rounds > 1:
            print(f"-- round {turn} of {args.rounds}", flush=True)
        found = [r for s in systems if (r := run_child(s, where, args.runs, sample, args.starters))]
        rounds.append(found)
        if len(found) < len(systems):
            break
    measured = [s for s in systems if all(s in {r.system for r in found} for found in rounds)]
    results = [
        median_result([r for found in rounds for r in found if r.system == s]) for s in measured
    ]
    if results:
        if len(rounds) > 1:
            print(f"\nevery figure the median of {len(rounds)} rounds", end="")
        print_table(results, sample)
        if len(rounds) > 1:
            print_rounds(rounds)
    if len(results) < len(systems):
        raise SystemExit(f"kept {directory} for its logs")
    shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
