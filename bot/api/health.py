"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.api.errors import json_response
from bot.api.routing import RouteTable
from bot.keys import ENGINE
from bot.metrics import REGISTRY, observe_engine
from engine.assembly import schema_head

routes = RouteTable("health")


@routes.get("/healthz", summary="The process is alive", roles=None, responses={200: "alive"})
async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


@routes.get(
    "/readyz",
    summary="The database is reachable and at the newest migration",
    roles=None,
    responses={200: "ready", 503: "not ready (reason says why)"},
)
async def readyz(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    try:
        current = await asyncio.wait_for(engine.queries.schema_revision(), 5)
    except Exception as exc:  # any failure to look means "not ready", with the reason
        return json_response(
            {"status": "unavailable", "reason": f"database unreachable: {exc}"}, status=503
        )
    head = schema_head()
    if current != head:
        return json_response(
            {
                "status": "unavailable",
                "reason": f"database at revision {current}, expected {head}: run signoff migrate",
            },
            status=503,
        )
    return json_response({"status": "ok", "revision": current})


@routes.get(
    "/metrics",
    summary="Prometheus metrics",
    roles=None,
    responses={200: "metrics (Prometheus text format)"},
    media_type="text/plain",
)
async def metrics(request: web.Request) -> web.Response:
    await observe_engine(request.app[ENGINE])
    return web.Response(
        body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST}
    )
