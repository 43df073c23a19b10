"""Python callables the tests declare as tools (``tools: {name: {function: ...}}``).

``CALLS`` records every call of ``record`` in this process, so a test can show that a refused
function never ran."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

CALLS: list[dict[str, Any]] = []


def record(**kwargs: Any) -> dict[str, Any]:
    """Remember the call; answer with its arguments and the thread it ran on."""
    CALLS.append(kwargs)
    return {"args": kwargs, "thread": threading.current_thread().name}


def slow(seconds: float = 3.0) -> str:
    """Block the calling thread, as a tool doing slow synchronous I/O does."""
    time.sleep(float(seconds))  # a tool's real thread blocked: its time limit is real time
    return "done"


def block(seconds: float = 3.0) -> str:
    """``slow`` under a name no tool declares: an ``app.yaml`` workflow's own function."""
    return slow(seconds)


async def slow_async(seconds: float = 3.0) -> str:
    """Wait on the loop without blocking it."""
    await asyncio.sleep(float(seconds))  # a tool's time limit is real time
    return "done"


def times_out() -> None:
    """A tool whose own call times out: its failure, not the time limit's."""
    raise TimeoutError("the upstream did not answer")


def slow_connector(action: str, args: dict[str, Any], idempotency_key: str) -> str:
    """A ``python`` connector that blocks for ``args.seconds`` (3 by default)."""
    return slow(args.get("seconds", 3.0))


def spy(**kwargs: Any) -> dict[str, Any]:
    """``record`` under a name no test declares: whether an undeclared function ran."""
    return record(**kwargs)
