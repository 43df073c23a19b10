"""Python callables named ``module:function``: the `tool` node and the `python` connector."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from engine.domain.errors import ConnectorError, StepError
from engine.ports import ConnectorCall


def resolve_callable(spec: str) -> Callable[..., Any]:
    """Import ``module:function`` (attribute paths allowed after the colon)."""
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


async def call_function(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Call ``fn(**kwargs)``, awaiting it when it is a coroutine function."""
    result = fn(**kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


class PythonConnector:
    """Calls ``function(action=..., args=..., idempotency_key=...)``."""

    def __init__(self, name: str, function: str) -> None:
        self.name = name
        self.function = function

    async def call(self, call: ConnectorCall) -> Any:
        fn = resolve_callable(self.function)
        try:
            return await call_function(
                fn,
                {
                    "action": call.action,
                    "args": dict(call.args),
                    "idempotency_key": call.idempotency_key,
                },
            )
        except StepError:
            raise
        except Exception as exc:
            raise ConnectorError(f"{self.name}.{call.action} raised {exc!r}") from exc
