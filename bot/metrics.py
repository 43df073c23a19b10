"""Prometheus metrics, in a registry of our own (so tests can build many apps)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from engine.assembly import Engine
from engine.domain.model import RunStatus

REGISTRY = CollectorRegistry()
REQUESTS = Counter(
    "signoff_http_requests_total", "HTTP requests", ["method", "status"], registry=REGISTRY
)
LATENCY = Histogram(
    "signoff_http_request_seconds", "HTTP request latency", ["method"], registry=REGISTRY
)
RUNS = Gauge("signoff_runs", "Runs by status", ["status"], registry=REGISTRY)
ACTIVE = Gauge(
    "signoff_worker_active_runs", "Runs being advanced by this process", registry=REGISTRY
)


async def observe_engine(engine: Engine) -> None:
    for status in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING):
        RUNS.labels(status.value).set(await engine.queries.count_runs(status))
    ACTIVE.set(engine.workers.active)
