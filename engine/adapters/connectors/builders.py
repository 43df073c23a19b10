"""One builder per connector type: the engine builds every type the config accepts.

``ConnectorType`` (``engine.config.connectors``) is the one table of types: ``type:`` in
``app.yaml`` accepts exactly its members, and ``CONNECTOR_BUILDERS`` maps each member to the
adapter that serves it (``tests/unit/test_connector_types.py`` checks that the two agree).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from engine.adapters.connectors.demo_ledger import DemoLedger, LedgerWriter
from engine.adapters.connectors.http import HttpConnector
from engine.adapters.connectors.python_callable import CallableRunner, PythonConnector
from engine.config import AppConfig, ConnectorConfig, ConnectorType
from engine.ports import Clock, Connector


@dataclass(frozen=True)
class BuildContext:
    """What a connector may need beyond its own configuration."""

    config: AppConfig
    ledger: LedgerWriter
    clock: Clock
    callables: CallableRunner


def _demo_ledger(c: ConnectorConfig, at: BuildContext) -> Connector:
    return DemoLedger(c.name, at.ledger, at.clock)


def _http(c: ConnectorConfig, at: BuildContext) -> Connector:
    return HttpConnector(
        c.name,
        c.base_url or "",
        actions={a: (spec.method or "POST", spec.path or "/" + a) for a, spec in c.actions.items()},
        headers=dict(c.headers),
        timeout_seconds=c.timeout_seconds,
        proxies=at.config.proxies,
    )


def _python(c: ConnectorConfig, at: BuildContext) -> Connector:
    return PythonConnector(c.name, c.function or "", at.callables, c.timeout_seconds)


ConnectorBuilder = Callable[[ConnectorConfig, BuildContext], Connector]

CONNECTOR_BUILDERS: Mapping[ConnectorType, ConnectorBuilder] = {
    ConnectorType.DEMO_LEDGER: _demo_ledger,
    ConnectorType.HTTP: _http,
    ConnectorType.PYTHON: _python,
}


def build_connectors(
    config: AppConfig, ledger: LedgerWriter, clock: Clock, callables: CallableRunner
) -> dict[str, Connector]:
    """A connector for each one ``config`` declares, by name."""
    at = BuildContext(config, ledger, clock, callables)
    return {name: CONNECTOR_BUILDERS[c.type](c, at) for name, c in config.connectors.items()}
