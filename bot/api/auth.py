"""Bearer-token authentication and role checks for the REST API.

Who acts as an admin is ``engine.domain.approvers.acting_role``'s rule, the same for every front
end: a token's person listed in ``admins:`` acts as an admin through any of their tokens."""

from __future__ import annotations

from aiohttp import web

from bot.api.routing import Handler, route_of
from bot.keys import ENGINE
from bot.tokens import hash_token
from engine.domain.approvers import admin_refusal, token_principal
from engine.domain.errors import Forbidden, Unauthorized
from engine.domain.model import ApiToken, Principal, Role

PRINCIPAL_KEY = web.RequestKey("signoff_principal", Principal)


async def bearer_token(request: web.Request) -> ApiToken:
    """The active token the request's bearer value names; ``Unauthorized`` without one."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("a bearer token is required (Authorization: Bearer <token>)")
    found = await request.app[ENGINE].tokens.by_hash(hash_token(token.strip()))
    if found is None:
        raise Unauthorized("the token is not valid or has been revoked")
    return found


def allowed(principal: Principal, roles: tuple[Role, ...]) -> bool:
    return principal.role == Role.ADMIN or principal.role in roles


@web.middleware
async def auth_middleware(
    request: web.Request,
    handler: Handler,
) -> web.StreamResponse:
    route = route_of(request)
    if route is not None and route.roles is not None:
        token = await bearer_token(request)
        config = request.app[ENGINE].config
        principal = token_principal(config, token)
        if not allowed(principal, route.roles):
            wanted = " or ".join(r.value for r in route.roles)
            why = f"your token is {principal.role.value}"
            if route.roles == (Role.ADMIN,):
                why = admin_refusal(config, token.role, token.person) or why
            raise Forbidden(f"this needs the {wanted} role; {why}")
        request[PRINCIPAL_KEY] = principal
    response: web.StreamResponse = await handler(request)
    return response


def principal(request: web.Request) -> Principal:
    """The authenticated caller of a route that declared roles."""
    return request[PRINCIPAL_KEY]
