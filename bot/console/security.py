"""Console sessions and CSRF tokens, both signed with ``server.secretKey`` (``links.Signer``).

Sessions: signing in exchanges an API token (approver or admin) for a cookie carrying the token's
name, person and role and an expiry, signed, ``HttpOnly``, ``SameSite=Strict``, ``Secure`` when
the public URL is https. Nothing is stored server-side, but every request checks that the token
is still active with the same person and role, so revoking a token ends its sessions.

CSRF: every form carries ``csrf_token`` = HMAC(``csrf``, a random per-browser cookie). A POST
without the cookie, or with a token that does not match it, is refused (403). The cookie is
``SameSite=Lax`` so that arriving from a chat link keeps the browser's token instead of
replacing it (the other tabs' forms stay valid); it is no credential by itself.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from aiohttp import web

from engine.config import AppConfig
from engine.domain.approvers import token_principal
from engine.domain.errors import Forbidden
from engine.domain.model import ApiToken, Principal, Role
from engine.ports import Clock
from engine.services.links import Signer
from engine.services.tokens import Tokens

SESSION_COOKIE = "signoff_session"
CSRF_COOKIE = "signoff_csrf"
CSRF_FIELD = "csrf_token"
SESSION_LIFETIME = timedelta(hours=12)
CONSOLE_ROLES = (Role.ADMIN, Role.APPROVER)
_NEW_CSRF = web.RequestKey("signoff_new_csrf", str)
_PRINCIPAL = web.RequestKey("signoff_session_principal", Principal)


@dataclass(frozen=True, slots=True)
class Session:
    token: str  # the API token's name
    person: str | None
    role: Role
    expires: int  # unix seconds


class Sessions:
    def __init__(
        self,
        signer: Signer,
        tokens: Tokens,
        clock: Clock,
        *,
        secure: bool,
        config: Callable[[], AppConfig],
    ) -> None:
        self.config = config  # who is an admin now (``engine.domain.approvers``)
        self.signer = signer
        self.tokens = tokens
        self.clock = clock
        self.secure = secure

    # -- the session cookie ------------------------------------------------------------------

    def encode(self, token: ApiToken, now: datetime) -> str:
        expires = int((now + SESSION_LIFETIME).timestamp())
        payload = {"n": token.name, "p": token.person, "r": token.role.value, "exp": expires}
        body = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
        return f"{body}.{self.signer.sign('session', body)}"

    def decode(self, value: str, now: datetime) -> Session | None:
        body, _, signature = value.partition(".")
        if not body or not self.signer.verify(signature, "session", body):
            return None
        try:
            raw = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            session = Session(str(raw["n"]), raw["p"], Role(raw["r"]), int(raw["exp"]))
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        return session if session.expires > now.timestamp() else None

    def start(self, response: web.StreamResponse, token: ApiToken) -> None:
        response.set_cookie(
            SESSION_COOKIE,
            self.encode(token, self.clock.now()),
            max_age=int(SESSION_LIFETIME.total_seconds()),
            path="/",
            httponly=True,
            samesite="Strict",
            secure=self.secure,
        )

    def end(self, response: web.StreamResponse) -> None:
        response.del_cookie(SESSION_COOKIE, path="/")

    async def principal(self, request: web.Request) -> Principal | None:
        """Who is signed in, or None. Checked against the token once per request."""
        if _PRINCIPAL in request:
            return request[_PRINCIPAL]
        raw = request.cookies.get(SESSION_COOKIE)
        session = self.decode(raw, self.clock.now()) if raw else None
        if session is None:
            return None
        token = await self.tokens.active(session.token)
        if token is None or token.person != session.person or token.role != session.role:
            return None
        if token.role not in CONSOLE_ROLES:
            return None
        who = token_principal(self.config(), token)  # acting_role: admins: decides
        request[_PRINCIPAL] = who
        return who

    # -- CSRF --------------------------------------------------------------------------------

    def csrf_token(self, request: web.Request) -> str:
        """The token for this browser's forms (``pages.render`` sets a new cookie if needed)."""
        cookie = request.get(_NEW_CSRF) or request.cookies.get(CSRF_COOKIE)
        if not cookie:
            cookie = request[_NEW_CSRF] = secrets.token_urlsafe(32)
        return self.signer.sign("csrf", cookie)

    def set_csrf_cookie(self, request: web.Request, response: web.StreamResponse) -> None:
        cookie = request.get(_NEW_CSRF)
        if cookie:
            response.set_cookie(
                CSRF_COOKIE, cookie, path="/", httponly=True, samesite="Lax", secure=self.secure
            )

    def check_csrf(self, request: web.Request, submitted: object) -> None:
        cookie = request.cookies.get(CSRF_COOKIE)
        if not cookie or not isinstance(submitted, str) or not submitted:
            raise Forbidden("this form is missing its security token: reload the page and retry")
        if not self.signer.verify(submitted, "csrf", cookie):
            raise Forbidden("this form's security token is out of date: reload the page and retry")
