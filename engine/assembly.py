"""The engine assembled from a configuration: store, connectors, workflows, interpreter,
approvals, workers and sweeper. Front ends hold one ``Engine`` and call its services."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import aiohttp

from engine.adapters.callbacks import SIGNATURE_HEADER as SIGNATURE_HEADER  # for sinks
from engine.adapters.callbacks import CallbackSink
from engine.adapters.callbacks import signature as signature  # for the front ends' sinks
from engine.adapters.clock import SystemClock as SystemClock  # bot starts clocks from here
from engine.adapters.connectors.builders import build_connectors
from engine.adapters.connectors.python_callable import CallableRunner, PythonTools
from engine.adapters.ids import UuidSource
from engine.adapters.llm import OpenAICompatibleSampler
from engine.adapters.outbound import OutboundGuard, client_session
from engine.adapters.store import Database, SqlStore
from engine.adapters.store.dbclock import DatabaseClock
from engine.adapters.store.listen import PgListener
from engine.config import AppConfig
from engine.config.reloading import LIVE_SECTIONS
from engine.domain import notify
from engine.domain.call_workflow import held_call_connectors
from engine.domain.model import Node, NodeType, Principal, Run
from engine.domain.policy_rules import ActionKind
from engine.domain.proxies import ProxySettings
from engine.domain.records import NewRun
from engine.gate import ConfidenceGate
from engine.ports import Clock, Connector, IdSource, Sampler, StepGate
from engine.ports.sink import Sink
from engine.ports.store import Store
from engine.services.approval_queue import QueueFilter, QueuePage, approval_queue
from engine.services.approvals import Approvals
from engine.services.calls import HeldCalls
from engine.services.chat_records import ChatRecords
from engine.services.connectors import ConnectorRegistry
from engine.services.context import Services
from engine.services.delegations import Delegations
from engine.services.delivery import Dispatcher
from engine.services.interpreter import Interpreter
from engine.services.queries import Queries
from engine.services.replays import ReplayGuard
from engine.services.runs import Runs
from engine.services.tokens import Tokens
from engine.services.workers import Sweeper, Workers
from engine.services.workflow_source import WorkflowSource
from engine.services.workflows import StoredWorkflows
from engine.standalone import schema_head as schema_head  # for bot/api/health.py

MAX_INPUT_BYTES = 256 * 1024
LISTEN_WAIT_SECONDS = 5.0  # the longest ``Engine.start`` waits for PostgreSQL's LISTEN
# The longest a new run waits for a worker slot of this process before it is queued instead
# (``Workers.offer_soon``). Starts that wait are the server's back-pressure: without it, 64
# clients in flight had 5,000 runs accepted 13 s before the last of them parked (every queued
# run costs a claim transaction besides); with it, the last parks within milliseconds of its
# start's answer (bench/peers.py, "last start accepted -> all parked").
START_WAIT_SECONDS = 1.0


@dataclass
class EngineOptions:
    # None: the system clock, following the database's on PostgreSQL (replicas agree on
    # expiry). A clock given here is used as it is unless ``sync_clock``.
    clock: Clock | None = None
    sync_clock: bool = False
    ids: IdSource = field(default_factory=UuidSource)
    owner: str | None = None  # this process's worker identity (lease owner)
    sampler: Sampler | None = None
    gate: StepGate | None = None
    extra_connectors: dict[str, Connector] = field(default_factory=dict)
    sinks: dict[str, Sink] = field(default_factory=dict)  # outbox delivery, by platform
    sweep_interval_seconds: float = 1.0


class Engine:
    def __init__(self, config: AppConfig, options: EngineOptions | None = None) -> None:
        opts = options or EngineOptions()
        self.config = config
        self.ids = opts.ids
        self.db = Database(config.database.url)
        self.store = SqlStore(self.db)
        # The services get it as their port; mypy checks here that ``SqlStore`` has every
        # operation of ``engine.ports.store.Store`` with the same signature.
        store: Store = self.store
        self.db_clock: DatabaseClock | None = None
        if not self.db.is_sqlite and (opts.clock is None or opts.sync_clock):
            self.db_clock = DatabaseClock(self.db, opts.clock or SystemClock())
        self.clock: Clock = self.db_clock or opts.clock or SystemClock()
        # The id's last characters: a time-ordered id begins with the time, which replicas
        # started together share.
        self.owner = opts.owner or f"{socket.gethostname()}:{self.ids.new_id()[-8:]}"
        # Python callables (tools, python connectors) run on these threads, under time limits.
        self.callables = CallableRunner()
        self.tools = PythonTools(config.tools, self.callables, config.operator_functions())
        built = {
            **build_connectors(config, self.store, self.clock, self.callables),
            **opts.extra_connectors,
        }
        self.connectors = ConnectorRegistry({**built, **held_call_connectors(built)})
        self.workflows = WorkflowSource(
            config.workflows,
            store,
            connectors=config.connectors,
            check_stored=config.stored_tool_problems,
        )
        # The LLM (ai-steps, the gate's self-consistency) comes from ``llm:`` unless injected.
        # The gate object is always installed, even while off: an admin may switch it on at
        # runtime, and its settings cache makes an idle gate free (no query per step).
        self._own_sampler = build_sampler(config) if opts.sampler is None else None
        self.sampler: Sampler | None = opts.sampler or self._own_sampler
        self.gate = ConfidenceGate.from_config(config, store, self.clock, self.sampler)
        self.interpreter = Interpreter(
            Services(
                store=store,
                workflows=self.workflows,
                connectors=self.connectors,
                clock=self.clock,
                ids=self.ids,
                expand_people=config.expand_people,
                expand_channels=config.expand_channels,
                requester_channels=config.requester_channels,
                call_python=self.tools.call,
                default_approvers=config.approvers,
                sampler=self.sampler,
                gate=opts.gate or self.gate,
                wake=self.wake,
                wake_outbox=self.wake_outbox,
                stopping=lambda: self.workers.stopping,
                reads_only=self._reads_only,
                lease_seconds=config.server.lease_seconds,
            )
        )
        server = config.server
        self.workers = Workers(
            store,
            self.interpreter,
            self.clock,
            owner=self.owner,
            concurrency=server.workers,
            lease=timedelta(seconds=server.lease_seconds),
            poll_seconds=server.poll_seconds,
        )
        self.approvals = Approvals(
            store,
            self.clock,
            self.ids,
            wake=self.workers.wake,
            wake_outbox=self.wake_outbox,
            workers=self.workers,
            config=config,
            workflows=self.workflows,
        )
        self.sweeper = Sweeper(
            store,
            self.clock,
            on_requeue=self.wake,
            outbox=notify.card_changed,
            interval_seconds=opts.sweep_interval_seconds,
            # PostgreSQL's batch locks only its own rows (SKIP LOCKED): it can be larger than
            # SQLite's, which holds the one writer for its whole transaction.
            batch=1000 if self.db.is_sqlite else 2000,
            drains=1 if self.db.is_sqlite else 2,
        )
        # The outbox claim lasts as long as a run's lease: a dead replica's messages go out
        # from another replica as soon as its runs do.
        self.dispatcher = Dispatcher(
            store,
            self.clock,
            opts.sinks,
            owner=self.owner,
            poll_seconds=1.0,
            hold=timedelta(seconds=server.lease_seconds),
        )
        if "callback" not in self.dispatcher.sinks:
            guard = OutboundGuard(server.allow_internal_targets, proxies=config.proxies)
            sink = CallbackSink(self.store, self.clock, server.secret_key, guard=guard)
            self.add_sink("callback", sink)
        self.calls = HeldCalls(config, store, self.connectors, self.clock, self.ids, wake=self.wake)
        # What the front ends call besides approvals and held calls (``bot`` reads and
        # writes through these, never through the store).
        self.runs = Runs(config, self.workflows, self._create_run)
        self.queries = Queries(self.store, self._approval_queue)
        self.tokens = Tokens(self.store, self.clock)
        self.chat = ChatRecords(self.store)
        self.replays = ReplayGuard(store, self.clock)  # chat requests act once
        self.delegations = Delegations(store, self.clock, config)  # people away
        self.stored_workflows = StoredWorkflows(config, self.store, self.clock)
        self.listener: PgListener | None = None
        self._started = False
        self._before_close: list[Callable[[], Awaitable[None]]] = []

    def _approval_queue(
        self, where: QueueFilter | None = None, *, limit: int, cursor: str | None
    ) -> Awaitable[QueuePage]:
        return approval_queue(self.store, where, limit=limit, cursor=cursor)

    def wake(self) -> None:
        """Runs may be ready (and a decision may have queued chat messages)."""
        self.workers.wake()
        self.dispatcher.wake()

    def _reads_only(self, node: Node) -> bool:
        """Whether ``node`` calls a connector action declared ``kind: read``."""
        if node.type != NodeType.CONNECTOR:
            return False
        connector = self.config.connectors.get(node.connector or "")
        action = connector.actions.get(node.action or "") if connector is not None else None
        return action is not None and action.kind == ActionKind.READ

    def wake_outbox(self) -> None:
        self.dispatcher.wake()

    def shared_sql_engine(self, *, reads_only: bool = False) -> Any:
        """The async SQLAlchemy engine on Signoff's database, for a front end whose library
        keeps its own tables there (slack_sdk's Slack installation and OAuth state stores,
        tables made by migration 0005): its transactions take SQLite's write lock when they
        begin, as the library's read-then-write ones need. ``reads_only``: one whose
        transactions never wait for that lock (SQLite's WAL lets a read run beside a write),
        for queries that only read. Typed ``Any``: nothing outside the store names
        SQLAlchemy."""
        return self.db.engine if reads_only else self.db.writing_engine()

    def before_close(self, work: Callable[[], Awaitable[None]]) -> None:
        """A front end's follow-up work to finish when the engine stops: awaited once its loops
        (workers, outbox) have stopped, before the database closes."""
        self._before_close.append(work)

    def add_sink(self, platform: str, sink: Sink) -> None:
        """Front ends register how their platform's messages are delivered."""
        self.dispatcher.sinks[platform] = sink

    async def start(self) -> None:
        """Start the background work: run workers and the expiry sweeper."""
        if self.db_clock is not None:
            await self.db_clock.sync()
            self.db_clock.start()
        if not self.db.is_sqlite:
            # Listening before the workers' first claim: the listener's catch-up wake-up then
            # comes before that claim, not after it (where it would say runs may be queued
            # when none is). A listener that cannot connect is not waited for: polling goes on.
            self.listener = PgListener(self.db.url, self.workers.wake, self.dispatcher.wake)
            self.listener.start()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.listener.first_attempt.wait(), LISTEN_WAIT_SECONDS)
        self.workers.start()
        self.sweeper.start()
        self.dispatcher.start()
        self._started = True

    async def stop(self) -> None:
        if self._started:
            if self.listener is not None:
                await self.listener.stop()
            await self.sweeper.stop()
            await self.workers.stop()
            if self.db_clock is not None:
                await self.db_clock.stop()
            await self.dispatcher.stop()
            self._started = False
        for work in self._before_close:
            await work()
        await self.connectors.close()
        self.callables.close()
        if self._own_sampler is not None:
            await self._own_sampler.close()
        await self.db.dispose()

    async def _create_run(
        self,
        workflow: str,
        input: dict[str, Any],
        *,
        requested_by: str,
        agent: str | None,
        idempotency_key: str | None,
    ) -> tuple[Run, bool]:
        """Write a queued run for ``Runs.start_run``, claimed in the same transaction by this
        process's workers when one of their slots is free within ``START_WAIT_SECONDS`` (no
        queue round trip)."""
        offer = await self.workers.offer_soon(START_WAIT_SECONDS, paced=True)
        try:
            run, created = await self.store.create_run(
                NewRun(
                    id=self.ids.new_id(),
                    workflow=workflow,
                    input=input,
                    requested_by=requested_by,
                    agent=agent,
                    idempotency_key=idempotency_key,
                    adopt=offer,
                ),
                self.clock.now(),
            )
            if offer is not None:
                offer.run_id = run.id if created else None
        finally:
            self.workers.settle(offer)
        if created and offer is None:
            self.workers.wake()  # a new run queues no chat message
        return run, created

    def reload(self, config: AppConfig) -> None:
        """Run with ``config`` from now on: ``engine.config.reloading.plan_reload``'s, which
        differs from the running one in ``LIVE_SECTIONS`` only (people, groups, admins,
        approvers). Every holder of the old one is handed the new one here, in one step of the
        event loop, so no request sees the two mixed; cached tokens are read again."""
        changed = [
            f.name
            for f in dataclasses.fields(config)
            if getattr(config, f.name) is not getattr(self.config, f.name)
        ]
        if any(name not in LIVE_SECTIONS for name in changed):
            raise ValueError(f"only {', '.join(LIVE_SECTIONS)} change while serving: {changed}")
        self.config = config
        self.approvals.config = config
        self.calls.config = config
        self.delegations.config = config
        self.runs.people = config
        self.stored_workflows.config = config
        services = self.interpreter.s
        services.expand_people = config.expand_people
        services.expand_channels = config.expand_channels  # groups: as they are now
        services.requester_channels = config.requester_channels  # people: as they are now
        services.default_approvers = config.approvers
        self.workflows.check_stored = config.stored_tool_problems  # tools: as they were
        self.tokens.forget()

    def principal_for_person(self, person: str) -> Principal:
        """A person from ``people:`` acting in chat or on the web page (``Runs``'s rule;
        ``engine.services.links`` asks the engine for it)."""
        return self.runs.principal_for_person(person)


def build_sampler(config: AppConfig) -> OpenAICompatibleSampler | None:
    """The LLM client for ``llm:``, or None when no LLM is configured."""
    llm = config.llm
    if not llm.enabled:
        return None
    return OpenAICompatibleSampler(
        llm.base_url,
        llm.model,
        llm.api_key,
        llm.timeout_seconds,
        llm.max_retries,
        proxies=config.proxies,
    )


def channels_of(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


# -- for the front ends' commands, pages and sinks: the database, HTTP, signatures -------------


def http_session(proxies: ProxySettings, *, timeout_seconds: float) -> aiohttp.ClientSession:
    """An aiohttp session for a front end's outbound calls (Slack's Web API and response_url,
    the Bot Framework's keys): each request through the proxy curl's rules choose
    (``engine.domain.proxies``; ``AppConfig.proxies``, read with the configuration). Open it
    inside the running event loop."""
    return client_session(proxies, timeout=aiohttp.ClientTimeout(total=timeout_seconds))
