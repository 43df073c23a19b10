"""The step retry policy (``engine.services.steps.RETRY``), run by the interpreter on the
injected clock: a retryable failure is called again after its backoff, with the key of its
attempt, up to ``MAX_ATTEMPTS``; a failure that is not retryable is not. Time is moved by the
test (``ManualClock``): nothing here sleeps for a backoff."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from engine.domain.errors import ConnectorError
from engine.domain.model import JournalEvent, RunStatus
from engine.ports import ConnectorCall
from engine.services.steps import MAX_ATTEMPTS, RETRY, RetryPolicy
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, make_engine, wait_for, wait_status

EXTRA = """
connectors:
  flaky:
    type: python
    function: "tests.support.engines:unused"
    actions: {put: {kind: write}}
"""

FLOW = """
flaky:
  nodes:
    - {id: put, type: connector, connector: flaky, action: put, args: {}}
"""


class Flaky:
    """A connector that fails its first ``failures`` calls (``retryable`` as told) and notes
    each call's idempotency key and the clock's time."""

    def __init__(self, clock: ManualClock, failures: int, *, retryable: bool = True) -> None:
        self.clock = clock
        self.failures = failures
        self.retryable = retryable
        self.calls: list[tuple[str, float]] = []

    async def call(self, call: ConnectorCall) -> Any:
        self.calls.append((call.idempotency_key, self.elapsed()))
        if len(self.calls) <= self.failures:
            raise ConnectorError(f"flaky {len(self.calls)}", retryable=self.retryable)
        return {"ok": True}

    def elapsed(self) -> float:
        return (self.clock.now() - START).total_seconds()


START = ManualClock().now()
# The engine's background timers on the clock (the sweeper, the lease renewer, the workers' and
# the dispatcher's fallback polls) sleep this long: the backoffs the test moves the clock by add
# up to far less than half of it, so every sleeper with less than half of it left is the step's
# backoff.
BACKGROUND_SECONDS = 60.0


async def run_flaky(db_url: str, failures: int, *, retryable: bool = True) -> dict[str, Any]:
    """Run the one-step workflow; at each backoff, note what the worker sleeps for and move
    the clock by exactly that. Returns what happened."""
    clock = ManualClock(START)
    flaky = Flaky(clock, failures, retryable=retryable)
    engine = make_engine(
        db_url,
        FLOW,
        clock=clock,
        extra=EXTRA,
        extra_connectors={"flaky": flaky},
        server=f"{{workers: 8, leaseSeconds: 30, pollSeconds: {BACKGROUND_SECONDS}}}",
        sweep_interval_seconds=BACKGROUND_SECONDS,
    )
    engine.workers.lease = timedelta(seconds=3 * BACKGROUND_SECONDS)  # renewed as seldom
    engine.dispatcher.poll_seconds = BACKGROUND_SECONDS
    await engine.start()
    slept: list[float] = []

    def backoffs() -> list[float]:
        return [left for left in clock.sleepers if left < BACKGROUND_SECONDS / 2]

    try:
        run, _ = await engine.runs.start_run("flaky", {}, AGENT)

        async def sleeping_or_done() -> bool:
            if backoffs():
                return True
            status = (await engine.store.get_run(run.id)).status
            return status in (RunStatus.COMPLETED, RunStatus.FAILED)

        while True:
            await wait_for(sleeping_or_done)
            if not backoffs():
                break
            (delay,) = backoffs()
            calls = len(flaky.calls)
            clock.advance(seconds=delay - 0.001)  # not yet: the worker goes on sleeping
            for _ in range(20):  # a woken sleeper would go on within a few loop turns
                await asyncio.sleep(0)
            assert backoffs() and len(flaky.calls) == calls
            clock.advance(seconds=0.001)
            slept.append(delay)

            async def called_again(calls: int = calls) -> bool:
                return len(flaky.calls) > calls

            await wait_for(called_again)
        status = await wait_status(engine, run.id, RunStatus.COMPLETED, RunStatus.FAILED)
        journal = await engine.store.journal(run.id)
    finally:
        await engine.stop()
    failed = [e.data for e in journal if e.event == JournalEvent.STEP_FAILED]
    return {"run": run.id, "status": status, "calls": flaky.calls, "slept": slept, "failed": failed}


def test_the_policy_backs_off_then_gives_up() -> None:
    assert MAX_ATTEMPTS == 3
    assert [RETRY.backoff(n) for n in (1, 2, 3)] == [0.2, 1.0, 1.0]
    transient, lasting = ConnectorError("x", retryable=True), ConnectorError("x")
    assert [RETRY.retries(transient, n) for n in (1, 2, 3)] == [True, True, False]
    assert not RETRY.retries(lasting, 1)
    assert RetryPolicy(max_attempts=1).retries(transient, 1) is False


@pytest.mark.parametrize("failures", [1, 2])
async def test_a_transient_failure_is_retried_on_the_clock(migrated_db_url, failures):
    got = await run_flaky(migrated_db_url, failures)
    assert got["status"] == RunStatus.COMPLETED
    keys = [key for key, _ in got["calls"]]
    assert keys == [f"{got['run']}:put:{n}" for n in range(1, failures + 2)]
    assert got["slept"] == [0.2, 1.0][:failures]
    # Each attempt is called when the clock has moved by the backoffs before it.
    assert [round(at, 3) for _, at in got["calls"]] == [0.0, 0.2, 1.2][: failures + 1]
    assert [(f["attempt"], f["retryable"]) for f in got["failed"]] == [
        (n, True) for n in range(1, failures + 1)
    ]


async def test_retries_stop_after_max_attempts(migrated_db_url):
    got = await run_flaky(migrated_db_url, failures=10)
    assert got["status"] == RunStatus.FAILED
    assert [key for key, _ in got["calls"]] == [
        f"{got['run']}:put:{n}" for n in range(1, MAX_ATTEMPTS + 1)
    ]
    assert got["slept"] == [0.2, 1.0]  # no backoff after the last attempt
    assert got["failed"][-1] == {"error": "flaky 3", "final": True, "attempt": MAX_ATTEMPTS}


async def test_a_lasting_failure_is_not_retried(migrated_db_url):
    got = await run_flaky(migrated_db_url, failures=10, retryable=False)
    assert got["status"] == RunStatus.FAILED
    assert [key for key, _ in got["calls"]] == [f"{got['run']}:put:1"]
    assert got["slept"] == []
    assert got["failed"] == [{"error": "flaky 1", "final": True, "attempt": 1}]
