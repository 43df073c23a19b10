"""Bearer-token authentication and role checks for the REST API."""

from __future__ import annotations

from aiohttp import web

from bot.api.routing import Handler, route_of
from bot.keys import ENGINE
from bot.tokens import hash_token
from engine.domain.approvers import token_principal
from engine.domain.errors import Forbidden, Unauthorized
from engine.domain.model import Principal, Role

PRINCIPAL_KEY = web.RequestKey("signoff_principal", Principal)


async def authenticate(request: web.Request) -> Principal:
    """The principal behind the request's bearer token; ``Unauthorized`` without a valid one."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("a bearer token is required (Authorization: Bearer <token>)")
    engine = request.app[ENGINE]
    found = await engine.tokens.by_hash(hash_token(token.strip()))
    if found is None:
        raise Unauthorized("the token is not valid or has been revoked")
    return token_principal(engine.config, found)  # an admin token acts as one while listed


def allowed(principal: Principal, roles: tuple[Role, ...]) -> bool:
    return principal.role == Role.ADMIN or principal.role in roles


@web.middleware
async def auth_middleware(
    request: web.Request,
    handler: Handler,
) -> web.StreamResponse:
    route = route_of(request)
    if route is not None and route.roles is not None:
        principal = await authenticate(request)
        if not allowed(principal, route.roles):
            wanted = " or ".join(r.value for r in route.roles)
            why = f"your token is {principal.role.value}"
            if route.roles == (Role.ADMIN,) and principal.person is not None:
                why = f"{principal.person} is not in admins:"
            raise Forbidden(f"this needs the {wanted} role; {why}")
        request[PRINCIPAL_KEY] = principal
    response: web.StreamResponse = await handler(request)
    return response


def principal(request: web.Request) -> Principal:
    """The authenticated caller of a route that declared roles."""
    return request[PRINCIPAL_KEY]
