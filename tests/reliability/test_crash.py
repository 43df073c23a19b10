"""Crash: replicas are SIGKILLed while runs are inside steps, while cards are being delivered,
during the expiry sweep, between a decision's commit and its HTTP answer, and at random
moments; each dead replica is restarted. Some requests are made overdue along the way, so the
sweepers have work (and are killed in it) while bob approves the rest, by Slack click or REST.
Then:

* 100 % of runs reach a terminal state (completed), each exactly once (one ``run_completed``);
* every request has exactly one outcome: each overdue one expired (its run took the expiry
  branch, one ``takeover_expired``, one expiry notice in Slack), every other one granted; a
  late click on an overdue request is refused, so none was both expired and granted;
* no completed step ran twice (the demo ledger records every call, so one row per step);
* a step interrupted mid-call ran again only with the same ``Idempotency-Key``;
* no Slack card was lost, nothing was read back from Slack (no ``conversations.history`` /
  ``replies``), and a message posted twice (a kill between Slack's post and its record) is
  posted once more per such kill, its copy labelled as replacing an earlier one (the fake Slack Web
  API records every message);
* no email was lost or doubled: bob's email card of every request arrived (``email:@bob``, a
  real SMTP server in the test), each with its one ``Message-ID``; a kill between the server's
  answer and the outbox's record sends that same message again, which a mail store files once;
  each expiry was a reply in its request's thread;
* the surviving replicas finished the dead one's leased runs within the lease time (measured
  from the last kill to the last run finishing, bounded by lease + slack), and delivered every
  message it had claimed (the claim lasts as long as the lease; the time from the last kill
  to an empty outbox, mostly Slack's pacing, is printed).

How a replica is killed, by moment:

* inside a step / during card delivery: the fake remote and the fake Slack see which client
  port has a call in flight, and the test kills the process owning that socket;
* during the sweep / after the sweep's commit / between commit and ack: the servers run with
  crash points (``engine/services/crashpoints.py``); the test arms one, makes the sweepers work
  (moves some requests' ``expiresAt`` into the past) or clicks, and the first replica to get there
  SIGKILLs itself on the spot;
* random moment: any replica after a random pause.

Three replicas on PostgreSQL; on SQLite the single process is killed and restarted (a run it
held is taken back when its lease runs out). 50 kills under ``SIGNOFF_RELIABILITY_FULL=1``.
"""

from __future__ import annotations

import asyncio
import random
import re
import signal
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from sqlalchemy import update

from bot.email.message import thread_id
from bot.slack.render import REPOSTED_CARD, REPOSTED_NOTICE
from engine.adapters.store import tables as t
from engine.domain.model import Role
from engine.services import crashpoints
from tests.fakes.slack import FakeSlack
from tests.integration.slack.harness import block_actions, signed_headers, slack_config
from tests.reliability.cluster import (
    TERMINAL,
    Cluster,
    replica_of_client,
    size,
    start_runs,
)
from tests.support.process import Server
from tests.support.smtp import SmtpServer, smtp_server
from tests.support.waiting import quiet

LEASE_SECONDS = 5
WORKERS = 8
CHANNEL = "C0CRASH"
MAIL_DOMAIN = "crash.test"
PUBLIC_URL = "http://signoff.crash.test"
BOB = "U0BOB0001"


@dataclass
class Remote:
    """The ``http`` connector's service: answers after a random short delay (so kills land
    inside the call) and records every request's Idempotency-Key."""

    keys: list[str] = field(default_factory=list)
    rng: random.Random = field(default_factory=lambda: random.Random(2))
    in_flight: dict[int, str] = field(default_factory=dict)  # caller's port -> key
    url: str = ""

    async def charge(self, request: web.Request) -> web.Response:
        key = request.headers.get("Idempotency-Key", "")
        self.keys.append(key)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        port = peer[1] if peer else 0
        self.in_flight[port] = key
        try:
            await quiet(self.rng.uniform(0.1, 0.4))  # a remote's real latency
        finally:
            self.in_flight.pop(port, None)
        return web.json_response({"charged": True, "amount": 42})


class PeerSlack(FakeSlack):
    """The fake Slack Web API, also noting which client port has a message post in flight
    (recorded but not yet answered: a kill then is a crash between Slack's post and the
    outbox commit)."""

    posting: dict[int, float]

    async def _api(self, request: web.Request) -> web.Response:
        if not hasattr(self, "posting"):
            self.posting = {}
        if request.match_info.get("method") != "chat.postMessage":
            return await super()._api(request)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        port = peer[1] if peer else 0
        self.posting[port] = time.monotonic()
        try:
            return await super()._api(request)
        finally:
            self.posting.pop(port, None)


@pytest.fixture
async def remote() -> AsyncIterator[Remote]:
    fake = Remote()
    app = web.Application()
    app.router.add_post("/charge", fake.charge)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield fake
    finally:
        await runner.cleanup()


def config(remote: Remote, slack: PeerSlack, channels: int, smtp: SmtpServer) -> str:
    return f"""\
people:
  alice: {{email: alice@example.com, slack: U0ALICE01}}
  bob: {{email: bob@example.com, slack: {BOB}}}
admins: [alice]
{slack_config(slack)}\
smtp: {{host: 127.0.0.1, port: {smtp.port}, security: none, from: signoff@{MAIL_DOMAIN}}}
connectors:
  remote:
    type: http
    baseUrl: {remote.url}
    timeoutSeconds: 30
    actions:
      charge: {{kind: write, method: POST, path: /charge}}
workflows:
""" + "".join(_workflow(i) for i in range(channels))


def _card_of(mail: Any) -> tuple[str, str, tuple[str, ...]]:
    """What every copy of one approval email shares: its subject, its thread and the arguments
    it shows (its state lines show the request as it stood when that copy was sent)."""
    arguments = tuple(re.findall(r'"order": "[^"]*"', mail.part("plain")))
    return str(mail.message["Subject"]), str(mail.message_id), arguments


def _workflow(i: int) -> str:
    # One channel per workflow: Slack paces each channel to about one message a second. An
    # expired request takes the ``expired`` branch (the test moves ``expiresAt`` itself).
    return f"""\
  crashy{i}:
    nodes:
      - {{id: before, type: connector, connector: demo-ledger, action: note,
         args: {{text: "charging {{{{ input.order }}}}"}}}}
      - {{id: charge, type: connector, connector: remote, action: charge,
         args: {{order: "{{{{ input.order }}}}"}}}}
      - {{id: approve, type: approval, approvers: [bob],
         channels: ["slack:{CHANNEL}{i:02d}", "email:@bob"],
         timeoutMinutes: 600, timeoutBehavior: auto-reject, onDeny: expired}}
      - {{id: after, type: connector, connector: demo-ledger, action: refund,
         args: {{order: "{{{{ input.order }}}}"}}, next: end}}
      - {{id: expired, type: connector, connector: demo-ledger, action: note,
         args: {{text: "expired {{{{ input.order }}}}"}}}}
"""


MODES = (
    "inside a step",
    "during card delivery",
    "during the sweep",
    "after the sweep's commit",
    "between commit and ack",
    "random moment",
)
# The crash point (engine/services/crashpoints.py) each hooked moment arms.
POINTS = {
    "during the sweep": "sweep",
    "after the sweep's commit": "swept",
    "between commit and ack": "ack",
}


@dataclass
class Approver:
    """Bob, approving each pending request once through any live replica: a click on its Slack
    card (when posted, half the time) or a REST grant. He also clicks the overdue requests,
    too late: those clicks must be refused."""

    cluster: Cluster
    http: aiohttp.ClientSession
    slack: FakeSlack
    rng: random.Random
    clicked: set[str] = field(default_factory=set)  # request ids answered 2xx/409
    overdue: set[str] = field(default_factory=set)  # request ids moved past expiresAt
    answers: Counter[tuple[str, int]] = field(default_factory=Counter)  # (how, HTTP status)
    late: Counter[int] = field(default_factory=Counter)  # HTTP status of late clicks

    async def unclicked(self) -> dict[str, str]:
        """run id -> request id of the pending requests bob has not answered yet."""
        pending = await self.cluster.pending_requests()
        return {r: q for r, q in pending.items() if q not in self.clicked | self.overdue}

    async def approve_parked(self) -> None:
        pending = await self.cluster.pending_requests()
        cards = await self.cluster.slack_cards()
        for run_id, request_id in pending.items():
            if request_id not in self.clicked:
                await self._click(run_id, request_id, cards.get(request_id))

    async def _click(self, run_id: str, request_id: str, card: tuple[str, str] | None) -> None:
        alive = [s for s in self.cluster.servers if s.proc and s.proc.returncode is None]
        if not alive:
            return
        server = self.rng.choice(alive)
        # An overdue request is clicked through REST only: Slack acknowledges every click
        # with 200, refused or not, and the ``ack`` crash point is for committed ones.
        slack = card is not None and request_id not in self.overdue and self.rng.random() < 0.5
        try:
            if slack and card is not None:
                status = await self._slack_click(server, request_id, *card)
            else:
                status = await self._rest_grant(server, run_id, request_id)
        except (aiohttp.ClientError, TimeoutError):
            return  # the replica died under the click: click again next round
        self.answers[("slack" if slack else "rest", status)] += 1
        if request_id in self.overdue:
            self.late[status] += 1
        if status in (200, 409):
            self.clicked.add(request_id)

    async def _rest_grant(self, server: Server, run_id: str, request_id: str) -> int:
        async with self.http.post(
            f"{server.base}/v1/runs/{run_id}/takeover/{request_id}/grant",
            json={"release": True},
            headers={"Authorization": f"Bearer {self.cluster.tokens['bob']}"},
        ) as resp:
            await resp.read()
            return resp.status

    async def _slack_click(self, server: Server, request_id: str, channel: str, ts: str) -> int:
        body = block_actions(
            BOB,
            "signoff_grant",
            request_id,
            channel=channel,
            message_ts=ts,
            response_url=self.slack.response_url(request_id),
            trigger_id=f"t-{request_id}",
        )
        async with self.http.post(
            server.base + "/slack/events", data=body, headers=signed_headers(body)
        ) as resp:
            await resp.read()
            return resp.status

    async def make_overdue(self, most: int = 3) -> bool:
        """Move ``expiresAt`` of up to ``most`` unclicked pending requests into the past, so
        the sweepers expire them now (the shortest approval timeout is a minute), and click
        them at once, late, racing the sweepers. False when none parked within two seconds."""
        for _ in range(100):
            unclicked = list((await self.unclicked()).values())
            if unclicked:
                break
            await quiet(0.02)  # real replicas
        else:
            return False
        chosen = self.rng.sample(unclicked, min(most, len(unclicked)))
        tr = t.takeover_requests.c
        async with self.cluster.db.begin() as conn:
            moved = list(
                await conn.execute(
                    update(t.takeover_requests)
                    .where(tr.id.in_(chosen), tr.status == "pending")
                    .values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
                    .returning(tr.id, tr.run_id)
                )
            )
        self.overdue |= {r.id for r in moved}
        for request in moved:
            await self._click(request.run_id, request.id, None)
        return True


async def died_at(
    cluster: Cluster, crash_dir: Path, point: str, provoke: Callable[[], Awaitable[Any]]
) -> Server | None:
    """Arm crash point ``point``, ``provoke`` what reaches it, and return the replica that
    killed itself there; None when no replica reached it within three seconds."""
    armed = crash_dir / point
    armed.touch()
    await provoke()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 3
    while True:
        dead = [s for s in cluster.servers if s.proc is not None and s.proc.returncode is not None]
        if dead:
            assert dead[0].proc is not None
            assert dead[0].proc.returncode == -signal.SIGKILL, cluster.logs()
            return dead[0]
        if loop.time() > deadline:
            try:
                armed.unlink()
                return None  # still armed: nobody got there
            except FileNotFoundError:
                pass  # taken just now: its process is dying
            assert loop.time() < deadline + 10, f"{point} was reached but nobody died"
        await quiet(0.02)  # real replicas


async def pick_victim(
    cluster: Cluster,
    mode: str,
    remote: Remote,
    slack: PeerSlack,
    approver: Approver,
    crash_dir: Path,
) -> Server | None:
    """The replica to kill for ``mode`` (already dead for a crash point), or None when nothing
    was in flight or no replica reached the point within a few seconds."""
    if mode == "random moment":
        await quiet(approver.rng.uniform(0.0, 0.5))  # a moment of real time
        return approver.rng.choice(cluster.servers)
    if mode in ("during the sweep", "after the sweep's commit"):
        return await died_at(cluster, crash_dir, POINTS[mode], approver.make_overdue)
    if mode == "between commit and ack":

        async def click_parked() -> None:
            for _ in range(100):  # bounded: two seconds for a run to park
                if await approver.unclicked():
                    break
                await quiet(0.02)  # real replicas
            await approver.approve_parked()

        return await died_at(cluster, crash_dir, POINTS[mode], click_parked)
    for _ in range(200):  # bounded: two seconds
        ports = list(remote.in_flight if mode == "inside a step" else getattr(slack, "posting", {}))
        for port in ports:
            server = replica_of_client(cluster, port)
            if server is not None:
                return server
        await quiet(0.01)  # real replicas
    return None


# Both databases at every size: with outbox claims as long as the lease (5 s here), a kill no
# longer strands cards for a minute.
@pytest.fixture(params=["postgres", "sqlite"])
def crash_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path}/signoff.db"
    url: str = request.getfixturevalue("migrated_postgres_url")
    return url


async def test_killed_replicas_lose_and_double_nothing(
    crash_db_url: str, tmp_path: Path, remote: Remote
) -> None:
    db_url = crash_db_url
    replicas = 1 if db_url.startswith("sqlite") else 3
    n_runs, kills = size(ci=24, full=300), size(ci=len(MODES), full=50)
    channels = size(ci=12, full=30)
    workflows = [f"crashy{i}" for i in range(channels)]
    rng = random.Random(50)
    crash_dir = tmp_path / "crash-points"
    crash_dir.mkdir()
    async with PeerSlack(post_delay=0.2) as slack, smtp_server() as smtp:
        cluster = Cluster(
            tmp_path,
            db_url,
            config(remote, slack, channels, smtp),
            replicas=replicas,
            # One public address for every replica, as behind a load balancer: a message sent
            # again by another replica carries the same links as the first.
            server=f"{{workers: {WORKERS}, leaseSeconds: {LEASE_SECONDS}, pollSeconds: 0.2, "
            f"publicUrl: '{PUBLIC_URL}'}}",
        )
        try:
            await cluster.setup()
            for server in cluster.servers:
                server.env[crashpoints.DIR_VAR] = str(crash_dir)
            await cluster.create_tokens(
                [("agent", Role.AGENT, None), ("bob", Role.APPROVER, "bob")]
            )
            await cluster.start()
            timeout = aiohttp.ClientTimeout(total=20)
            async with aiohttp.ClientSession(timeout=timeout) as http:
                approver = Approver(cluster, http, slack, rng)

                # Runs arrive in batches while replicas die: kills land in every phase.
                run_ids: list[str] = []
                killed: Counter[str] = Counter()
                batches = max(kills, 1)
                per_batch = -(-n_runs // batches)
                last_kill = time.monotonic()

                async def start_batch() -> None:
                    run_ids.extend(
                        await start_runs(
                            http,
                            cluster,
                            cluster.tokens["agent"],
                            workflows,
                            min(per_batch, n_runs - len(run_ids)),
                            offset=len(run_ids),
                        )
                    )

                for k in range(kills):
                    if len(run_ids) < n_runs:
                        await start_batch()
                    await approver.approve_parked()
                    mode = MODES[k % len(MODES)]
                    victim = await pick_victim(cluster, mode, remote, slack, approver, crash_dir)
                    killed[mode if victim else f"{mode}: missed, random instead"] += 1
                    victim = victim or rng.choice(cluster.servers)
                    await victim.kill()
                    last_kill = time.monotonic()
                    await victim.start()
                while len(run_ids) < n_runs:
                    await start_batch()

                async def all_terminal() -> dict[str, str] | None:
                    await approver.approve_parked()
                    runs = await cluster.run_statuses()
                    done = len(runs) == n_runs and all(s in TERMINAL for s in runs.values())
                    return runs if done else None

                runs = await cluster.wait_until(
                    "every run to finish", all_terminal, LEASE_SECONDS * 4 + 60 + n_runs * 0.5
                )
                takeover_s = time.monotonic() - last_kill

                async def cards_settled() -> bool:
                    return not await cluster.outbox_unsent()

                try:
                    # A dead dispatcher's claimed messages wait out its claim (the lease) first;
                    # then Slack's pacing (a message a second per channel) sets the pace.
                    await cluster.wait_until("every card to be delivered", cards_settled, 120)
                except AssertionError:
                    left = Counter((r.kind, r.status) for r in await cluster.outbox_unsent())
                    raise AssertionError(f"undelivered: {left}") from None
                settled_s = time.monotonic() - last_kill
            journal = await cluster.journal_counts()
            ledger_rows: dict[tuple[str, str], list[Any]] = defaultdict(list)
            for row in await cluster.ledger_rows():
                ledger_rows[(row.run_id, row.step_id)].append(row)
            completed = await cluster.completed_at()
            requests = await cluster.takeovers()
        finally:
            await cluster.close()

        assert Counter(runs.values()) == Counter({"completed": n_runs}), cluster.logs()
        # Each request has one outcome: expired when it was made overdue, granted otherwise.
        # Its run ended once, through the branch of that outcome.
        assert len(requests) == n_runs
        overdue = approver.overdue
        expired_runs = {r.run_id for r in requests if r.id in overdue}
        for request in requests:
            events = journal[request.run_id]
            outcomes = (
                events[("takeover_granted", "approve")],
                events[("takeover_expired", "approve")],
            )
            if request.id in overdue:
                assert (request.status, outcomes) == ("expired", (0, 1)), (request, events)
            else:
                assert (request.status, outcomes) == ("released", (1, 0)), (request, events)
        assert 200 not in approver.late, approver.late  # a late click never won
        # No completed step ran again: every ledger row of a step was written before that
        # step's step_completed event, under the step's one idempotency key. A step cut off
        # mid-call (ledger row written, step_completed not) ran once more, same key.
        ledger_extra = 0
        for run_id in run_ids:
            assert journal[run_id][("run_completed", None)] == 1, journal[run_id]
            expired = run_id in expired_runs
            taken, skipped = ("expired", "after") if expired else ("after", "expired")
            for step in ("before", "charge", taken):
                assert journal[run_id][("step_completed", step)] == 1, journal[run_id]
            assert journal[run_id][("step_started", skipped)] == 0, journal[run_id]
            assert ledger_rows[(run_id, skipped)] == [], (run_id, skipped)
            for step in ("before", taken):
                rows = ledger_rows[(run_id, step)]
                assert 1 <= len(rows) <= 2, (run_id, step, rows)
                assert {r.idempotency_key for r in rows} == {f"{run_id}:{step}:1"}, rows
                assert all(r.at <= completed[(run_id, step)] for r in rows), (rows, completed)
                ledger_extra += len(rows) - 1
        # The remote saw each run's charge at least once, always under its first attempt's key.
        by_run: dict[str, list[str]] = defaultdict(list)
        for key in remote.keys:
            by_run[key.split(":")[0]].append(key)
        assert set(by_run) == set(run_ids)
        assert all(set(keys) == {f"{r}:charge:1"} for r, keys in by_run.items()), by_run
        retried = {r: len(k) - 1 for r, k in by_run.items() if len(k) > 1}
        # Each extra call follows a kill of the replica holding that run: one kill cuts off at
        # most ``workers`` calls, so no run can have more extra calls than there were kills.
        assert all(n <= kills for n in retried.values()), retried
        assert sum(retried.values()) + ledger_extra <= kills * WORKERS, (retried, ledger_extra)

        # Slack: every request's card arrived, each expiry was announced in its thread, and
        # nothing was read back from Slack. A kill between Slack's post and its record leaves
        # Signoff unable to know the message is there (it reads no history): the message is
        # posted once more, labelled as replacing an earlier copy (docs/slack.md, "Posted
        # again"). So every extra copy carries the label, the first copy never does, and each
        # kill adds at most one copy of a message (and one per channel sending at that moment).
        assert slack.history_reads() == [], slack.history_reads()
        posted = Counter(m.dedupe for m in slack.posted())
        cards = {d for d in posted if (d or "").startswith("card:")}
        assert {r.id for r in requests} <= {c.split(":")[1] for c in cards}, cards
        notices = Counter(
            d.split(":")[2] for d in posted if (d or "").startswith("notice:expired:")
        )
        assert notices == Counter(overdue), (notices, overdue)
        reposts = 0
        for key, copies in slack.duplicates().items():
            first, *again = [m for m in slack.posted() if m.dedupe == key]
            assert not first.text.startswith((REPOSTED_CARD, REPOSTED_NOTICE)), key
            assert all(m.text.startswith((REPOSTED_CARD, REPOSTED_NOTICE)) for m in again), key
            assert copies - 1 <= kills, (key, copies)  # each copy after the first follows a kill
            reposts += copies - 1
        # The dispatcher sends each channel's next message side by side, so one kill may cut off
        # one post per channel (the CI run on a loaded machine saw 11 reposts from 6 kills).
        assert reposts <= kills * channels, reposts
        if killed["during card delivery"]:
            assert reposts >= 1  # the kill landed between a post and its record
        # Email: every request's card reached bob under its one Message-ID, and nothing else
        # did (a copy sent again after a kill carries the same id); each expiry is a reply.
        mails: dict[str, list[Any]] = defaultdict(list)
        for mail in smtp.messages:
            mails[mail.message_id].append(mail)
        roots = {r.id: thread_id(r.id, "email:@bob", MAIL_DOMAIN) for r in requests}
        assert set(roots.values()) <= set(mails), set(roots.values()) - set(mails)
        cards_sent = set(roots.values())
        for mail_id, copies in mails.items():
            if mail_id in cards_sent:
                # A card sent again shows its request as it stands then (decided meanwhile,
                # perhaps): the same subject, thread and arguments.
                assert len({_card_of(m) for m in copies}) == 1, copies
                assert _card_of(copies[0])[2], copies[0]  # the arguments are there to compare
            else:  # a notice's copies differ in their Date at most
                assert len({(m.message["Subject"], m.part("plain")) for m in copies}) == 1, copies
        resent = sum(len(copies) - 1 for copies in mails.values())
        assert resent <= kills, resent  # each copy after the first follows a kill
        expired = Counter(
            copies[0].message["In-Reply-To"]
            for copies in mails.values()
            if " with no decision: " in copies[0].part("plain")
        )
        assert expired == Counter(roots[r] for r in overdue), expired
        assert takeover_s < LEASE_SECONDS * 4 + 60
        # Each crash point was reached: the hooks are still where the kills are meant to land.
        assert all(killed[mode] for mode in POINTS), killed
        print(
            f"\n{replicas} replica(s): {n_runs} runs, {kills} kills survived, runs lost 0, "
            f"kills by moment {dict(killed)}; re-run interrupted steps: remote charge "
            f"{sum(retried.values())}, ledger {ledger_extra} (same key each); requests expired "
            f"by the sweepers {len(overdue)} (one outcome and one expiry notice each, late "
            f"clicks {dict(approver.late)}), granted {n_runs - len(overdue)} (clicks "
            f"{dict(approver.answers)}); cards {len(cards)} (lost 0, posted again, labelled "
            f"{reposts}); emails to bob {len(smtp.messages)} (cards {len(roots)}, lost 0; sent "
            f"again under the same Message-ID {resent}; expiry replies {sum(expired.values())}); "
            f"last run "
            f"finished {takeover_s:.1f} s and the outbox settled {settled_s:.1f} s after the "
            f"last kill (lease {LEASE_SECONDS} s)"
        )
