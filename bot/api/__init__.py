"""The REST API under /v1, plus /healthz, /readyz, /metrics and /openapi.json."""

from __future__ import annotations

from bot.api import approvals, calls, gate, health, openapi, people, runs
from bot.api.routing import RouteTable


def route_tables() -> list[RouteTable]:
    """Every route table of the REST API; each front-end module adds its own here."""
    return [
        health.routes,
        openapi.routes,
        runs.routes,
        gate.routes,
        calls.routes,
        approvals.routes,
        people.routes,
    ]
