"""Duplicate delivery: every Slack button click is delivered four times (at once, spread over
the replicas, as a retrying proxy or a double-clicking person would). Side effects divided by
approvals must be exactly 1.000, every delivery is acknowledged, and each card is updated
once per decision (no duplicate posts) and emailed once: one card and one decision reply per
request, to a real SMTP server, each Message-ID once. Every Teams ``Action.Execute`` invoke is
delivered three times likewise: side effects divided by approvals is exactly 1.000 again.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from engine.domain.model import Role
from tests.fakes.slack import FakeSlack
from tests.fakes.teams import FakeConnector
from tests.integration.slack.harness import SECRET, block_actions, signed_headers
from tests.integration.teams.teamsharness import Teams
from tests.reliability.cluster import TERMINAL, Cluster, size, start_runs
from tests.support.smtp import SmtpServer, smtp_server
from tests.support.waiting import quiet

CHANNELS = 8  # Slack paces each channel to about a message a second
SLACK_COPIES = 4
TEAMS_COPIES = 3
BOB = "U0BOB0001"


def config(slack: FakeSlack, smtp: SmtpServer) -> str:
    flows = "".join(
        f"""\
  pay{i}:
    nodes:
      - {{id: approve, type: approval, approvers: [bob],
         channels: ["slack:C0DUP{i:04d}", "email:@bob"], timeoutMinutes: 600}}
      - {{id: act, type: connector, connector: demo-ledger, action: refund,
         args: {{order: "{{{{ input.order }}}}"}}}}
"""
        for i in range(CHANNELS)
    )
    return f"""\
people:
  alice: {{email: alice@example.com, slack: U0ALICE01}}
  bob: {{email: bob@example.com, slack: {BOB}, teams: aad-bob}}
admins: [alice]
slack: {{botToken: '{slack.token}', signingSecret: '{SECRET}', apiBaseUrl: '{slack.api_url}'}}
teams: {{insecureLocalDev: true}}  # the test's invokes are unsigned
smtp: {{host: 127.0.0.1, port: {smtp.port}, security: none, from: signoff@dup.test}}
workflows:
{flows}"""


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def smtp() -> AsyncIterator[SmtpServer]:
    async with smtp_server() as server:
        yield server


@pytest.fixture
async def cluster(
    db_url: str, tmp_path: Path, slack: FakeSlack, smtp: SmtpServer
) -> AsyncIterator[Cluster]:
    replicas = 1 if db_url.startswith("sqlite") else 3
    c = Cluster(
        tmp_path,
        db_url,
        config(slack, smtp),
        replicas=replicas,
        server="{workers: 8, leaseSeconds: 30, pollSeconds: 0.2}",
    )
    try:
        await c.setup()
        await c.create_tokens([("agent", Role.AGENT, None)])
        await c.start()
        yield c
    finally:
        await c.close()


async def test_each_slack_click_four_times_one_side_effect(
    cluster: Cluster, slack: FakeSlack, smtp: SmtpServer
) -> None:
    n = size(ci=16, full=200)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        run_ids = await start_runs(
            http, cluster, cluster.tokens["agent"], [f"pay{i}" for i in range(CHANNELS)], n
        )

        async def cards_posted() -> dict[str, tuple[str, str]] | None:
            cards = await cluster.slack_cards()
            return cards if len(cards) == n else None

        cards = await cluster.wait_until("every card to be posted", cards_posted, 60 + n)

        async def deliver(request_id: str, copy: int) -> int:
            channel, ts = cards[request_id]
            body = block_actions(
                BOB,
                "signoff_grant",
                request_id,
                channel=channel,
                message_ts=ts,
                response_url=slack.response_url(request_id),
                trigger_id=f"trigger-{request_id}",
            )
            server = cluster.servers[copy % len(cluster.servers)]
            async with http.post(
                server.base + "/slack/events", data=body, headers=signed_headers(body)
            ) as resp:
                await resp.read()
                return resp.status

        acks = await asyncio.gather(
            *(deliver(request_id, copy) for request_id in cards for copy in range(SLACK_COPIES))
        )

        async def all_terminal() -> dict[str, str] | None:
            runs = await cluster.run_statuses()
            return runs if all(s in TERMINAL for s in runs.values()) else None

        runs = await cluster.wait_until("every run to finish", all_terminal, 60 + n)

        async def mails_settled() -> bool:
            return not await cluster.outbox_unsent()

        await cluster.wait_until("every email to be sent", mails_settled, 60 + n)
    assert Counter(acks) == Counter({200: n * SLACK_COPIES}), Counter(acks)
    # Bob's thread of each request: its card, one decision, the step's result; each once.
    firsts = Counter(m.part("plain").partition(" ")[0] for m in smtp.messages)
    assert firsts == Counter({"Approval": n, "bob": n, "Step": n}), firsts
    assert len(set(smtp.message_ids())) == len(smtp.messages) == 3 * n
    assert set(runs.values()) == {"completed"}, Counter(runs.values())
    journal = await cluster.journal_counts()
    approvals = sum(journal[r][("takeover_granted", "approve")] for r in run_ids)
    side_effects = sum(1 for row in await cluster.ledger_rows() if row.step_id == "act")
    assert approvals == n
    assert side_effects / approvals == 1.0, (side_effects, approvals)
    assert slack.duplicates() == {}, slack.duplicates()
    print(
        f"\n{len(cluster.servers)} replica(s): {n} requests x {SLACK_COPIES} Slack deliveries, "
        f"acks {dict(Counter(acks))}, approvals {approvals}, side effects {side_effects}, "
        f"ratio {side_effects / approvals:.3f}, duplicate posts 0; emails {len(smtp.messages)} "
        f"({n} cards, {n} decisions, {n} results; doubled 0)"
    )


async def test_each_teams_invoke_three_times_one_side_effect(cluster: Cluster) -> None:
    n = size(ci=16, full=200)
    async with (
        FakeConnector() as connector,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
    ):
        # The harness's activity builder, without its in-process server.
        teams = Teams(client=None, engine=None, connector=connector, clock=None)  # type: ignore[arg-type]
        run_ids = await start_runs(
            http, cluster, cluster.tokens["agent"], [f"pay{i}" for i in range(CHANNELS)], n
        )

        async def all_parked() -> dict[str, str] | None:
            pending = await cluster.pending_requests()
            return pending if len(pending) == n else None

        pending = await cluster.wait_until("every run to park", all_parked, 60 + n)

        async def deliver(activity: dict[str, object], copy: int) -> int:
            server = cluster.servers[copy % len(cluster.servers)]
            async with http.post(server.base + "/api/messages", json=activity) as resp:
                await resp.read()
                return resp.status

        activities = [teams.click_activity("grant", pending[r], as_="bob") for r in run_ids]
        acks = await asyncio.gather(
            *(deliver(activity, copy) for activity in activities for copy in range(TEAMS_COPIES))
        )

        async def all_terminal() -> dict[str, str] | None:
            runs = await cluster.run_statuses()
            return runs if all(s in TERMINAL for s in runs.values()) else None

        runs = await cluster.wait_until("every run to finish", all_terminal, 60 + n)
    assert set(acks) <= {200}, Counter(acks)
    assert set(runs.values()) == {"completed"}, Counter(runs.values())
    journal = await cluster.journal_counts()
    approvals = sum(journal[r][("takeover_granted", "approve")] for r in run_ids)
    side_effects = sum(1 for row in await cluster.ledger_rows() if row.step_id == "act")
    assert approvals == n
    assert side_effects / approvals == 1.0, (side_effects, approvals)
    print(
        f"\n{len(cluster.servers)} replica(s): {n} requests x {TEAMS_COPIES} Teams invokes, "
        f"acks {dict(Counter(acks))}, approvals {approvals}, side effects {side_effects}, "
        f"ratio {side_effects / approvals:.3f}"
    )


async def test_an_event_and_its_retries_across_the_replicas_make_one_reply(
    cluster: Cluster, slack: FakeSlack
) -> None:
    """An @mention's first delivery and Slack's retries of it (same ``event_id``) reach
    every replica at the same moment: exactly one of them answers it, each time."""
    n = size(ci=20, full=100)
    channel = "C0DUP0000"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:

        async def deliver(i: int, copy: int) -> int:
            body = json.dumps(
                {
                    "type": "event_callback",
                    "team_id": "T0SIGNOFF",
                    "api_app_id": "A0SIGNOFF",
                    "event_id": f"Ev0DUP{i:05d}",
                    "event_time": 1,
                    "event": {
                        "type": "app_mention",
                        "user": BOB,
                        "text": "<@U0SIGNOFF> help?",
                        "channel": channel,
                        "ts": f"1700000200.{i:06d}",
                    },
                }
            )
            headers = {**signed_headers(body), "Content-Type": "application/json"}
            if copy:
                headers |= {"X-Slack-Retry-Num": str(copy), "X-Slack-Retry-Reason": "timeout"}
            server = cluster.servers[copy % len(cluster.servers)]
            async with http.post(server.base + "/slack/events", data=body, headers=headers) as r:
                await r.read()
                return r.status

        copies = max(len(cluster.servers), 2)
        acks = await asyncio.gather(*(deliver(i, c) for i in range(n) for c in range(copies)))

        async def every_thread_answered() -> bool:
            return len({m.thread_ts for m in slack.posted(channel)}) == n

        await cluster.wait_until("a reply in every thread", every_thread_answered, 60)
        await quiet(1.0)  # a second reply, had one been started, has reached the fake
    assert Counter(acks) == Counter({200: n * copies}), Counter(acks)
    replies = Counter(m.thread_ts for m in slack.posted(channel))
    assert len(replies) == n and set(replies.values()) == {1}, replies
