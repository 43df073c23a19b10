"""The connectors by name: what the interpreter and held calls look a step's connector up in.

The connectors themselves are adapters (``engine.adapters.connectors``), built by
``engine.assembly``; the lookup is the services' own, so it lives with them."""

from __future__ import annotations

from collections.abc import Mapping

from engine.domain.errors import NotFound
from engine.ports import Connector


class ConnectorRegistry:
    """Connectors by name, built once at startup."""

    def __init__(self, connectors: Mapping[str, Connector]) -> None:
        self._connectors = dict(connectors)

    def get(self, name: str) -> Connector:
        try:
            return self._connectors[name]
        except KeyError:
            raise NotFound(f"connector {name!r} is not configured", connector=name) from None

    def names(self) -> list[str]:
        return sorted(self._connectors)

    async def close(self) -> None:
        for connector in self._connectors.values():
            close = getattr(connector, "close", None)
            if close is not None:
                await close()
