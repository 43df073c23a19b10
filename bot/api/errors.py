"""One place maps every error to an HTTP status and an ``error`` code: ``{error, message}``."""

from __future__ import annotations

import functools
import json
import logging

from aiohttp import web

from bot.api.routing import Handler
from engine.domain import errors as e

log = logging.getLogger(__name__)

STATUS: list[tuple[type[e.SignoffError], int]] = [
    # A stored workflow that passed its JSON Schema (a body that does not is a 400) and broke a
    # rule no schema can say (unknown connector, dangling next, ...): understood, not processed.
    (e.ConfigError, 422),
    (e.Unprocessable, 422),  # the same for a rule of another body (``/v1/people/{name}/away``)
    (e.InvalidRequest, 400),
    (e.Unauthorized, 401),
    (e.Forbidden, 403),
    (e.NotFound, 404),
    (e.AlreadyDecided, 409),
    (e.Conflict, 409),
    (e.Gone, 410),
    (e.NondeterminismError, 500),
    (e.StepError, 502),
    (e.StoreError, 503),
]


def status_for(exc: e.SignoffError) -> int:
    for kind, status in STATUS:
        if isinstance(exc, kind):
            return status
    return 500


# Outbound JSON is always valid JSON: a non-finite number fails here (a 500 naming no data)
# instead of reaching a client as ``NaN``, which no JSON reader but Python's accepts.
dumps = functools.partial(json.dumps, allow_nan=False)


def json_response(body: object, *, status: int = 200) -> web.Response:
    """``web.json_response`` that never writes ``NaN`` or ``Infinity``."""
    return web.json_response(body, status=status, dumps=dumps)


def error_response(http_status: int, code: str, message: str, **extra: object) -> web.Response:
    body = {"error": code, "message": message, **{k: v for k, v in extra.items() if v is not None}}
    return json_response(body, status=http_status)


# JSON errors for the API only; web pages render their own (bot.console.pages).
_API_PATHS = frozenset({"/v1", "/healthz", "/readyz", "/openapi.json"})


def is_api_path(path: str) -> bool:
    return path in _API_PATHS or path.startswith("/v1/")


@web.middleware
async def error_middleware(
    request: web.Request,
    handler: Handler,
) -> web.StreamResponse:
    if not is_api_path(request.path):
        return await handler(request)
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except e.SignoffError as exc:
        status = status_for(exc)
        if status >= 500:
            log.error("%s %s: %s", request.method, request.path, exc.message)
        extra: dict[str, object] = {
            k: v for k, v in exc.fields.items() if isinstance(v, str | int | float | list)
        }
        if isinstance(exc, e.ConfigError):
            extra["problems"] = exc.problems
        if isinstance(exc, e.AlreadyDecided):
            extra["status"] = exc.current
            extra["decidedBy"] = exc.decided_by
        extra.pop("request_id", None)
        extra.pop("run_id", None)
        extra.pop("decided_by", None)
        return error_response(status, exc.code, exc.message, **extra)
    except web.HTTPException as exc:
        if exc.status < 400 or exc.content_type == "application/json":
            raise
        code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(
            exc.status, "http_error"
        )
        # 405 keeps aiohttp's Allow header (the methods the path has).
        response = error_response(exc.status, code, exc.reason)
        if "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except json.JSONDecodeError as exc:
        return error_response(400, "invalid_json", f"the body is not valid JSON: {exc}")
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal", "internal error")
