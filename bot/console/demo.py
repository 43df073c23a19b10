"""The first run: ``app.yaml``'s ``refund-demo`` workflow, started from the console's *Start demo
run* button or by ``signoff demo``.

The demo run is started by a made-up agent, ``demo-agent``, not by the person who clicked: the
point is to watch a person approve what an agent proposed, and nobody may approve a run they
started themselves.

``signoff demo`` works on the database directly, like ``signoff token``: it queues the run,
lets its own workers drive it to the approval (a running server may take it first; either is
fine), prints the approval page and, when ``server.secretKey`` is set, one signed link per
approver, and leaves the parked run to the server. With an empty secret key each process signs
with a key of its own, so this process cannot sign links the server accepts: it says so and
points to the console instead. It runs no outbox dispatcher, so chat cards are left to the
server, which has the Slack and Teams clients.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, TextIO

from bot.api.views import approval_url
from engine.assembly import Engine, EngineOptions
from engine.config import AppConfig
from engine.domain.errors import SignoffError
from engine.domain.model import (
    TERMINAL_RUN_STATUSES,
    Principal,
    Role,
    Run,
    TakeoverRequest,
    TakeoverStatus,
)
from engine.services.links import ApprovalLinks, Signer

DEMO_WORKFLOW = "refund-demo"
DEMO_AGENT = Principal(name="demo-agent", role=Role.AGENT, token="demo-agent")


def demo_input(seed: str) -> dict[str, Any]:
    """An order number that differs from run to run; the amount to refund is the one the
    workflow's lookup finds for it (``engine.adapters.connectors.demo_ledger``)."""
    number = 1000 + int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16) % 9000
    return {"order": f"A-{number}"}


async def start_demo(engine: Engine) -> Run:
    """Queue a run of the demo workflow (``NotFound`` when ``app.yaml`` has none)."""
    run, _ = await engine.runs.start_run(
        DEMO_WORKFLOW, demo_input(engine.ids.new_id()), DEMO_AGENT, agent=DEMO_AGENT.name
    )
    return run


def has_demo(config: AppConfig) -> bool:
    return DEMO_WORKFLOW in config.workflows


# -- signoff demo (``bot.cli.demo``) -----------------------------------------------------------


async def run_demo(
    config: AppConfig,
    *,
    timeout: float = 30.0,
    out: TextIO,
    options: EngineOptions | None = None,
) -> int:
    """Start a demo run, wait for its approval, print where to decide it. Exit status."""
    if not has_demo(config):
        print(f"error: {config.source} has no {DEMO_WORKFLOW} workflow", file=out)
        return 1
    engine = Engine(config, options)
    engine.workers.start()  # only the workers: the server delivers cards and sweeps expiry
    try:
        run = await start_demo(engine)
        print(f"started run {run.id} of {DEMO_WORKFLOW} ({run.input['order']})", file=out)
        request = await _approval_of(engine, run.id, timeout)
        if request is None:
            print(f"error: run {run.id} did not reach its approval in {timeout:g} s", file=out)
            return 1
        _print_links(engine, request, out)
        return 0
    except SignoffError as exc:
        print(f"error: {exc.message}", file=out)
        return 1
    finally:
        await engine.workers.stop()
        await engine.stop()


async def _approval_of(engine: Engine, run_id: str, timeout: float) -> TakeoverRequest | None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        found = await engine.queries.list_takeovers(
            run_id=run_id, statuses=[TakeoverStatus.PENDING], limit=1
        )
        if found:
            return found[0]
        if (await engine.queries.get_run(run_id)).status in TERMINAL_RUN_STATUSES:
            return None
        await asyncio.sleep(0.1)
    return None


def _print_links(engine: Engine, request: TakeoverRequest, out: TextIO) -> None:
    server = engine.config.server
    print(f"approval page: {approval_url(server.public_url, request.id)}", file=out)
    signer = Signer(server.secret_key)
    if signer.ephemeral:
        print(
            "server.secretKey is empty, so only the server can sign approval links: open the "
            "page above and sign in to the console (signoff serve prints a sign-in link), or "
            "set SIGNOFF_SECRET_KEY for both and run this again.",
            file=out,
        )
    else:
        for person, url in ApprovalLinks(engine, signer).urls(request).items():
            print(f"approval link for {person}: {url}", file=out)
    print(f"run page: {server.public_url}/console/runs/{request.run_id}", file=out)
