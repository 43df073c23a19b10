"""Python callables named ``module:function``: the `tool` node and the `python` connector.

Each call runs under a time limit and off the event loop, so one slow callable cannot stop the
server answering (``/healthz``, lease renewals, other runs):

- a plain function runs on a thread of ``CallableRunner``'s pool (``signoff-tool-*``);
- a coroutine function runs on the loop and is cancelled at its limit.

A thread cannot be stopped from outside: a synchronous call past its limit goes on in its
thread while its step fails. That failure is never retried (``StepError(retryable=False)``):
a second attempt would run the same side effect again beside the first. A call still queued for
a thread when its limit passes is withdrawn and never starts.

Which callables may run is ``app.yaml``'s decision (``engine.config.tools``,
``engine.config.reach``); ``PythonTools`` checks it once more at the call.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import logging
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from engine.config.tools import DEFAULT_TOOL_TIMEOUT, ToolConfig
from engine.domain.errors import ConnectorError, StepError
from engine.domain.model import Node
from engine.ports import ConnectorCall

log = logging.getLogger(__name__)

DEFAULT_THREADS = 8


def resolve_callable(spec: str) -> Callable[..., Any]:
    """Import ``module:function`` (attribute paths allowed after the colon). Only for specs
    ``app.yaml`` declares: importing runs a module's top-level code."""
    module_name, _, attr_path = spec.partition(":")
    if not module_name or not attr_path:
        raise StepError(f"{spec!r} is not of the form module:function")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr_path.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise StepError(f"cannot load {spec!r}: {exc}") from exc
    if not callable(target):
        raise StepError(f"{spec!r} is not callable")
    return target  # type: ignore[no-any-return]


class CallableRunner:
    """Runs callables under a time limit: plain ones on a bounded thread pool, coroutine
    functions on the loop."""

    def __init__(self, threads: int = DEFAULT_THREADS) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="signoff-tool")

    async def run(
        self, fn: Callable[..., Any], kwargs: dict[str, Any], *, limit: float, what: str
    ) -> Any:
        """``fn(**kwargs)``, awaited when it gives an awaitable; ``StepError`` (not retried)
        when it takes longer than ``limit`` seconds. The callable's own exceptions (its own
        ``TimeoutError`` too) come out as they are."""
        try:
            async with asyncio.timeout(limit) as deadline:
                if inspect.iscoroutinefunction(fn):
                    result = fn(**kwargs)
                else:
                    loop = asyncio.get_running_loop()
                    result = await loop.run_in_executor(self._pool, functools.partial(fn, **kwargs))
                if inspect.isawaitable(result):
                    result = await result
                return result
        except TimeoutError:
            if not deadline.expired():
                raise
            log.warning("%s did not finish within %gs; its step fails, not retried", what, limit)
            raise StepError(
                f"{what} did not finish within {limit:g}s (not retried: it may still be running)",
                retryable=False,
            ) from None

    def close(self) -> None:
        """Stop taking calls; threads still running finish on their own."""
        self._pool.shutdown(wait=False, cancel_futures=True)


class PythonTools:
    """What a `tool` node runs: a tool ``app.yaml`` declares (``tool: <name>``), or a
    ``function`` that a declared tool or an ``app.yaml`` workflow names (``operator``).
    Anything else fails the step without being imported."""

    def __init__(
        self,
        declared: Mapping[str, ToolConfig],
        runner: CallableRunner,
        operator: Collection[str] = (),
    ) -> None:
        self.declared = dict(declared)
        self.runner = runner
        self.operator = frozenset(operator)  # functions app.yaml's workflows name themselves

    async def call(self, node: Node, args: dict[str, Any]) -> Any:
        """Run ``node``'s callable with ``args`` under its time limit."""
        spec, limit, what = self._target(node)
        return await self.runner.run(resolve_callable(spec), args, limit=limit, what=what)

    def _target(self, node: Node) -> tuple[str, float, str]:
        if node.tool is not None:
            tool = self.declared.get(node.tool)
            if tool is None:
                raise StepError(f"tool {node.tool} is not declared in app.yaml's tools:")
            return tool.function, tool.timeout_seconds, f"tool {tool.name}"
        spec = node.function or ""
        tool = next((t for t in self.declared.values() if t.function == spec), None)
        if tool is not None:
            return spec, tool.timeout_seconds, f"tool {tool.name}"
        if spec in self.operator:
            return spec, DEFAULT_TOOL_TIMEOUT, f"tool {node.id} ({spec})"
        raise StepError(f"{spec!r} is not declared in app.yaml: not run")


class PythonConnector:
    """Calls ``function(action=..., args=..., idempotency_key=...)`` under the connector's
    ``timeoutSeconds``."""

    def __init__(
        self, name: str, function: str, runner: CallableRunner, timeout_seconds: float
    ) -> None:
        self.name = name
        self.function = function
        self.runner = runner
        self.timeout_seconds = timeout_seconds

    async def call(self, call: ConnectorCall) -> Any:
        fn = resolve_callable(self.function)
        kwargs = {
            "action": call.action,
            "args": dict(call.args),
            "idempotency_key": call.idempotency_key,
        }
        what = f"{self.name}.{call.action}"
        try:
            return await self.runner.run(fn, kwargs, limit=self.timeout_seconds, what=what)
        except StepError:
            raise
        except Exception as exc:
            raise ConnectorError(f"{what} raised {exc!r}") from exc
