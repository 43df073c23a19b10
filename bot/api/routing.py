"""Routes declared once, with their OpenAPI description: the router and ``/openapi.json`` are
built from the same table, so the document cannot drift from the routes. Request bodies are
validated against the declared JSON Schema before a handler runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from engine.domain.model import Role

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    roles: tuple[Role, ...] | None  # None: no token needed
    body: dict[str, Any] | None = None  # JSON Schema of the request body
    responses: dict[int, str] = field(default_factory=dict)
    query: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> schema
    tag: str = "api"
    media_type: str = "application/json"  # of the success responses; errors are always JSON
    result: dict[str, Any] | None = None  # JSON Schema of a success body (None: any object)


class RouteTable:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.routes: list[Route] = []

    def add(
        self,
        method: str,
        path: str,
        *,
        summary: str,
        roles: tuple[Role, ...] | None,
        body: dict[str, Any] | None = None,
        responses: dict[int, str] | None = None,
        query: dict[str, dict[str, Any]] | None = None,
        media_type: str = "application/json",
        result: dict[str, Any] | None = None,
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.routes.append(
                Route(
                    method=method,
                    path=path,
                    handler=handler,
                    summary=summary,
                    roles=roles,
                    body=body,
                    responses=responses or {200: "OK"},
                    query=query or {},
                    tag=self.tag,
                    media_type=media_type,
                    result=result,
                )
            )
            return handler

        return register

    def get(self, path: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.add("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.add("POST", path, **kw)

    def patch(self, path: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.add("PATCH", path, **kw)

    def put(self, path: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.add("PUT", path, **kw)

    def delete(self, path: str, **kw: Any) -> Callable[[Handler], Handler]:
        return self.add("DELETE", path, **kw)


ROUTES = web.AppKey("signoff_routes", dict[tuple[str, str], Route])


def mount(app: web.Application, tables: list[RouteTable]) -> None:
    """Add every route to ``app`` and index them for the auth middleware and the OpenAPI
    document."""
    index: dict[tuple[str, str], Route] = {}
    for table in tables:
        for route in table.routes:
            app.router.add_route(route.method, route.path, route.handler)
            index[(route.method, route.path)] = route
    app[ROUTES] = index


def route_of(request: web.Request) -> Route | None:
    """The declared route a request matched, if any."""
    resource = request.match_info.route.resource
    if resource is None or ROUTES not in request.app:
        return None
    return request.app[ROUTES].get((request.method, resource.canonical))


def obj(
    properties: dict[str, Any], required: tuple[str, ...] = (), *, extra: bool = False
) -> dict[str, Any]:
    """A JSON Schema object; unknown properties are refused unless ``extra``."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": extra,
    }
    if required:
        schema["required"] = list(required)
    return schema


STR = {"type": "string"}
NOTES = {"type": ["string", "null"], "maxLength": 4000}
AGENT_FIELD = {
    "type": "string",
    "maxLength": 200,
    "description": (
        "Optional. The acting agent is always the token's own name; this may only narrow it to "
        "the token's name or a sub-name '<token name>/<sub>' (gets the token's gate settings, "
        "then its own). Any other agent is refused with 403 and nothing is stored."
    ),
}
