"""Python callables run off the event loop under a time limit
(``engine.adapters.connectors.python_callable``), and a `tool` node finds its declared tool."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

import pytest

from engine.adapters.connectors.python_callable import CallableRunner, PythonConnector, PythonTools
from engine.config.tools import ToolConfig
from engine.domain.errors import StepError
from engine.domain.model import Node, NodeType
from engine.ports import ConnectorCall
from tests.support import tools
from tests.support.waiting import quiet


@pytest.fixture
async def runner() -> AsyncIterator[CallableRunner]:
    pool = CallableRunner(threads=2)
    yield pool
    pool.close()


def tool_node(**fields: str) -> Node:
    return Node(id="t", type=NodeType.TOOL, **fields)  # type: ignore[arg-type]


async def test_a_synchronous_tool_runs_on_a_thread_of_the_pool(runner: CallableRunner) -> None:
    declared = {"rec": ToolConfig("rec", "tests.support.tools:record", 5)}
    out = await PythonTools(declared, runner).call(tool_node(tool="rec"), {"n": 1})
    assert out["args"] == {"n": 1}
    assert out["thread"].startswith("signoff-tool")
    assert out["thread"] != threading.current_thread().name


async def test_a_slow_synchronous_tool_fails_by_its_time_limit_and_the_loop_runs_on(
    runner: CallableRunner,
) -> None:
    declared = {"slow": ToolConfig("slow", "tests.support.tools:slow", 0.3)}
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await quiet(0.01)  # the loop keeps turning in real time while the thread blocks
            ticks += 1

    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    with pytest.raises(StepError) as caught:
        await PythonTools(declared, runner).call(tool_node(tool="slow"), {"seconds": 2})
    elapsed = time.perf_counter() - started
    ticker.cancel()
    # Its thread sleeps on (a thread cannot be stopped): a retry would run the tool a second
    # time beside the first, so the step fails for good.
    assert not caught.value.retryable
    assert "tool slow did not finish within 0.3s (not retried" in caught.value.message
    assert elapsed < 1.5, elapsed
    assert ticks >= 5  # the loop kept turning while the tool slept in its thread


async def test_a_coroutine_tool_runs_on_the_loop_under_its_limit(runner: CallableRunner) -> None:
    declared = {"wait": ToolConfig("wait", "tests.support.tools:slow_async", 0.2)}
    with pytest.raises(StepError, match=r"within 0\.2s"):
        await PythonTools(declared, runner).call(tool_node(tool="wait"), {"seconds": 5})
    assert await PythonTools(declared, runner).call(tool_node(tool="wait"), {"seconds": 0}) == (
        "done"
    )


async def test_a_tools_own_timeout_error_is_its_failure_not_the_limit(
    runner: CallableRunner,
) -> None:
    declared = {"t": ToolConfig("t", "tests.support.tools:times_out", 5)}
    with pytest.raises(TimeoutError, match="upstream"):
        await PythonTools(declared, runner).call(tool_node(tool="t"), {})


async def test_an_app_yaml_function_gets_the_limit_of_the_tool_declaring_it(
    runner: CallableRunner,
) -> None:
    declared = {"slow": ToolConfig("slow", "tests.support.tools:slow", 0.2)}
    node = tool_node(function="tests.support.tools:slow")
    with pytest.raises(StepError, match=r"within 0\.2s"):
        await PythonTools(declared, runner).call(node, {"seconds": 2})


async def test_an_undeclared_tool_name_fails_the_step(runner: CallableRunner) -> None:
    with pytest.raises(StepError, match="not declared"):
        await PythonTools({}, runner).call(tool_node(tool="shell"), {})


async def test_a_python_connector_has_its_time_limit_too(runner: CallableRunner) -> None:
    connector = PythonConnector("slow", "tests.support.tools:slow_connector", runner, 0.2)
    call = ConnectorCall(connector="slow", action="go", args={}, idempotency_key="r:s:1")
    with pytest.raises(StepError, match=r"slow\.go did not finish within 0\.2s"):
        await connector.call(call)


async def test_a_call_still_waiting_for_a_thread_at_its_limit_never_starts() -> None:
    """One thread, held by a slow tool: the next call's limit passes in the queue, and the
    call is withdrawn rather than run late."""
    pool = CallableRunner(threads=1)
    declared = {
        "slow": ToolConfig("slow", "tests.support.tools:slow", 0.2),
        "rec": ToolConfig("rec", "tests.support.tools:record", 0.2),
    }
    calls = len(tools.CALLS)
    try:
        blocker = asyncio.create_task(
            PythonTools(declared, pool).call(tool_node(tool="slow"), {"seconds": 0.6})
        )
        await quiet(0.05)  # the slow tool's real thread has started and holds the one thread
        with pytest.raises(StepError, match=r"tool rec did not finish within 0\.2s"):
            await PythonTools(declared, pool).call(tool_node(tool="rec"), {"late": True})
        with pytest.raises(StepError):
            await blocker
        await quiet(0.6)  # the slow tool's real thread is free again
        assert len(tools.CALLS) == calls
    finally:
        pool.close()
