"""``/openapi.json`` and the router agree: every route is documented with its method, and every
documented operation is routed. Chat platform endpoints (Slack, Teams: their platforms describe
them), the HTML pages and static files are mounted outside the route tables and are exempt."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from engine.adapters.store.migrate import upgrade_to_head
from tests.support.api import Api, running_api

FLOW = """
noop:
  nodes:
    - {id: note, type: connector, connector: demo-ledger, action: note, args: {text: hi}}
"""
CHAT = ("bot.slack", "bot.teams")  # platform endpoints, described by the platforms
WEB = ("bot.web", "bot.console")  # the server-rendered pages


def _from(route: web.AbstractRoute, packages: tuple[str, ...]) -> bool:
    module = getattr(route.handler, "__module__", "") or ""
    return any(module == p or module.startswith(p + ".") for p in packages)


def routed(app: web.Application, *, packages: tuple[str, ...] | None = None) -> set[Any]:
    """(method, path) of every route but HEAD twins, static files and chat endpoints; with
    ``packages``, only the routes whose handlers live there."""
    found = set()
    for route in app.router.routes():
        resource = route.resource
        if route.method == "HEAD" or resource is None:
            continue
        if isinstance(resource, web.StaticResource) or _from(route, CHAT):
            continue
        if packages is not None and not _from(route, packages):
            continue
        found.add((route.method.lower(), resource.canonical))
    return found


def documented(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method, path) for path, item in doc["paths"].items() for method in item}


@pytest.fixture
async def api(sqlite_url: str) -> AsyncIterator[Api]:
    await upgrade_to_head(sqlite_url)  # the document does not depend on the database
    async with running_api(sqlite_url, FLOW) as api:
        yield api


async def document(api: Api) -> dict[str, Any]:
    status, doc = await api.call("GET", "/openapi.json")
    assert status == 200
    assert isinstance(doc, dict)
    return doc


async def test_every_documented_operation_is_routed(api: Api) -> None:
    doc = documented(await document(api))
    assert doc - routed(api.client.server.app) == set(), "in /openapi.json but not routed"
    assert ("post", "/v1/runs/{id}/takeover/{tkId}/grant") in doc
    assert ("get", "/openapi.json") in doc


async def test_every_api_route_is_documented(api: Api) -> None:
    app = api.client.server.app
    api_routes = routed(app) - routed(app, packages=WEB)
    assert api_routes, "no routes found: the filter is wrong"
    assert api_routes - documented(await document(api)) == set(), "routed but not documented"


async def test_web_pages_are_html_and_not_in_the_api_document(api: Api) -> None:
    """HTML pages (approval page, console) are exempt like static files: people use them, not
    API clients, and the document describes JSON operations only."""
    pages = routed(api.client.server.app, packages=WEB)
    assert pages, "no web pages mounted"
    assert pages & documented(await document(api)) == set()


async def test_operations_are_well_formed(api: Api) -> None:
    doc = await document(api)
    assert doc["openapi"] == "3.1.0"  # its schemas are JSON Schema 2020-12 (type lists)
    assert doc["info"]["title"] and doc["info"]["version"]
    operation_ids = []
    for path, item in doc["paths"].items():
        placeholders = set(re.findall(r"{(\w+)}", path))
        for method, op in item.items():
            where = f"{method.upper()} {path}"
            operation_ids.append(op["operationId"])
            assert op["summary"], where
            assert op["responses"], where
            for code, response in op["responses"].items():
                assert code.isdigit() and response["description"], (where, code)
                ((media_type, content),) = response["content"].items()
                if int(code) >= 400:
                    assert media_type == "application/json", where
                    assert content["schema"] == {"$ref": "#/components/schemas/Error"}, where
            if any(p["in"] == "query" for p in op.get("parameters", [])):
                assert "400" in op["responses"], f"{where}: a bad query is a 400"
            path_params = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert path_params == placeholders, where
            if "requestBody" in op:
                assert method in ("post", "put", "patch"), where
                body = op["requestBody"]["content"]["application/json"]["schema"]
                assert body["type"] == "object", where
            if op.get("security"):
                assert "401" in op["responses"], where
    assert len(operation_ids) == len(set(operation_ids)), "operationId must be unique"
    assert set(doc["components"]["securitySchemes"]) == {"bearer"}


async def test_documented_security_matches_the_routes(api: Api) -> None:
    doc = await document(api)
    for path, item in doc["paths"].items():
        if "{" in path:
            continue  # needs real ids; the flat routes are enough to check the auth layer
        for method, op in item.items():
            if method != "get":
                continue
            status, _ = await api.call("GET", path)
            if op.get("security"):
                assert status == 401, (path, status)
            else:
                assert status != 401, (path, status)


async def test_metrics_are_documented_as_the_text_they_are(api: Api) -> None:
    doc = await document(api)
    assert set(doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == {"text/plain"}
    resp = await api.client.get("/metrics")
    assert resp.content_type == "text/plain"
