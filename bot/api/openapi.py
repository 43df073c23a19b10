"""``GET /openapi.json``, generated from the route table (it cannot drift from the routes)."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web
from jsonschema import Draft202012Validator

from bot.api.errors import json_response
from bot.api.routing import ROUTES, Route, RouteTable
from bot.api.views import SCHEMAS
from engine.domain.json_input import MAX_INT

routes = RouteTable("meta")

ERROR_SCHEMA = {
    "type": "object",
    "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
    "required": ["error", "message"],
}


# What engine.json_input refuses anywhere in a request, said in JSON Schema so the document
# promises no more than the server accepts: no NUL in any string (a path id, a query, a body's
# value or key), no number beyond ±MAX_INT, and free-form objects and arrays hold only such
# values.
NO_NUL = "^[^\\x00]*$"
NUMBER_BOUNDS = {"minimum": -MAX_INT, "maximum": MAX_INT}
JSON_VALUE = {
    "anyOf": [
        {"type": ["null", "boolean"]},
        {"type": "number", **NUMBER_BOUNDS},
        {"type": "string", "pattern": NO_NUL},
        {"type": "array", "items": {"$ref": "#/components/schemas/JsonValue"}},
        {
            "type": "object",
            "propertyNames": {"pattern": NO_NUL},
            "additionalProperties": {"$ref": "#/components/schemas/JsonValue"},
        },
    ]
}
_ANY = {"$ref": "#/components/schemas/JsonValue"}


def bounded(schema: Any) -> Any:
    """``schema`` with the rules above added (a copy: the route table's own schemas stay)."""
    if isinstance(schema, list):
        return [bounded(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: bounded(value) for key, value in schema.items()}
    kinds = out.get("type")
    # Only type names: a ``properties`` map walked here may hold a property called "type".
    listed = kinds if isinstance(kinds, list) else [kinds]
    kinds = {kind for kind in listed if isinstance(kind, str)}
    if "string" in kinds and not {"pattern", "enum", "const"} & out.keys():
        out["pattern"] = NO_NUL
    if {"integer", "number"} & kinds:
        out = {**NUMBER_BOUNDS, **out}
    if "object" in kinds and "properties" not in out and "additionalProperties" not in out:
        out.update(propertyNames={"pattern": NO_NUL}, additionalProperties=_ANY)
    if "array" in kinds and "items" not in out:
        out["items"] = _ANY
    return out


def document(all_routes: list[Route]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in all_routes:
        op: dict[str, Any] = {
            "summary": route.summary,
            "operationId": f"{route.method.lower()}_{route.handler.__name__}",
            "tags": [route.tag],
            "responses": {
                str(code): _response(code, text, route)
                for code, text in sorted(route.responses.items())
            },
        }
        params = [
            {"name": name, "in": "path", "required": True, "schema": bounded({"type": "string"})}
            for name in re.findall(r"{(\w+)}", route.path)
        ]
        params += [
            {"name": name, "in": "query", "required": False, "schema": bounded(schema)}
            for name, schema in route.query.items()
        ]
        if params:
            op["parameters"] = params
        if route.body is not None:
            op["requestBody"] = {
                # The server reads an empty body as {}: optional where {} is a valid body.
                "required": not Draft202012Validator(route.body).is_valid({}),
                "content": {"application/json": {"schema": bounded(route.body)}},
            }
        if route.roles is not None:
            op["security"] = [{"bearer": []}]
        paths.setdefault(route.path, {})[route.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Signoff",
            "version": "1",
            "description": "Human approval for AI agents and workflows.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": ERROR_SCHEMA, "JsonValue": JSON_VALUE, **SCHEMAS},
        },
    }


def _response(code: int, text: str, route: Route) -> dict[str, Any]:
    media_type = route.media_type
    schema: dict[str, Any]
    if code >= 400:
        media_type, schema = "application/json", {"$ref": "#/components/schemas/Error"}
    elif media_type != "application/json":
        schema = {"type": "string"}
    else:
        schema = route.result or {"type": "object"}
    return {"description": text, "content": {media_type: {"schema": schema}}}


@routes.get("/openapi.json", summary="This document", roles=None, responses={200: "OpenAPI 3"})
async def openapi(request: web.Request) -> web.Response:
    return json_response(document(list(request.app[ROUTES].values())))
