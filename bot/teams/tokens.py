"""Checking a Bot Framework token before anything of the request is read.

``TokenGate.check(auth_header)`` decides from the ``Authorization`` header alone whether a
request may go on: a Bearer JWT from the configured issuer (``teams.tokenIssuer``, by default
``https://api.botframework.com``), for this bot's app id, unexpired, signed by a key the
issuer's OpenID metadata publishes. Anything else is ``NotAuthenticated`` (HTTP 401) before
the body is parsed. The SDK checks the token again afterwards, against the activity (its
serviceUrl and channel), with the same keys.

Why not leave it all to the SDK: for a token naming the Bot Framework Emulator's issuers, or
shaped like a skill's, the SDK validates against *other* OpenID documents on the internet,
fetched with blocking ``requests`` calls inside the event loop, without a timeout, and again
on every request while the fetch fails. Here, an issuer that is not configured is refused
without any fetch.

``SigningKeys`` is the one copy of the configured issuer's keys: fetched once (concurrent
requests share the fetch), kept for a day, refreshed in the background every few hours,
fetched again for an unknown key id at most every few minutes, with a short timeout, and not
retried for a while after a failure. The adapter hands it to the SDK as its metadata cache.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import jwt
from jwt.algorithms import RSAAlgorithm

from engine.assembly import http_session
from engine.domain.proxies import ProxySettings

log = logging.getLogger(__name__)

FETCH_TIMEOUT = 5.0  # seconds for the metadata document and for the key set, each
KEYS_MAX_AGE = 24 * 3600.0  # the SDK's own rule: keys a day old are fetched again
UNKNOWN_KEY_REFETCH = 300.0  # a key id not in the set: look again at most this often
FAILED_FETCH_PAUSE = 30.0  # after a failed fetch, requests are refused without trying again
CLOCK_TOLERANCE = 300  # seconds, as the SDK allows
ALGORITHMS = ("RS256",)


class NotAuthenticated(Exception):
    """The request's JWT is missing, forged, expired, or meant for another bot."""


@dataclass(frozen=True, slots=True)
class SigningKey:
    """One published key, as the SDK's ``JwtTokenExtractor`` reads it."""

    public_key: Any
    endorsements: list[str]


class SigningKeys:
    """The configured issuer's signing keys (module docstring); the SDK calls ``get``."""

    def __init__(
        self,
        metadata_url: str,
        *,
        timeout: float = FETCH_TIMEOUT,
        now: Callable[[], float] = time.monotonic,
        proxies: ProxySettings | None = None,
    ) -> None:
        self.metadata_url = metadata_url
        self.timeout = timeout
        self.proxies = proxies or ProxySettings()
        self.fetches = 0  # completed or failed fetches of the metadata document
        self._now = now
        self._keys: dict[str, SigningKey] = {}
        self._fetched_at: float | None = None
        self._tried_at: float | None = None
        self._lock = asyncio.Lock()

    async def get(self, key_id: str | None) -> SigningKey:
        """The key with ``key_id``; ``PermissionError`` when there is none to be had."""
        fresh = self._fetched_at is not None and self._now() - self._fetched_at < KEYS_MAX_AGE
        if not fresh or (key_id not in self._keys and self._may_refetch()):
            await self.refresh(only_if_older_than=self._fetched_at)
        key = self._keys.get(key_id or "")
        if key is None:
            raise PermissionError(f"no signing key {key_id!r} from {self.metadata_url}")
        return key

    def _may_refetch(self) -> bool:
        return self._fetched_at is None or self._now() - self._fetched_at >= UNKNOWN_KEY_REFETCH

    async def renew(self) -> None:
        """Fetch the keys again now (the background refresh), unless a fetch just failed."""
        await self.refresh(only_if_older_than=self._fetched_at)

    async def refresh(self, *, only_if_older_than: float | None = None) -> None:
        """Fetch the metadata and keys. Requests waiting here share one fetch: a caller that
        saw the keys as of ``only_if_older_than`` finds them newer and fetches nothing."""
        async with self._lock:
            if self._fetched_at is not None and self._fetched_at != only_if_older_than:
                return  # fetched while this caller waited
            if self._tried_at is not None and self._now() - self._tried_at < FAILED_FETCH_PAUSE:
                if self._fetched_at is None or self._tried_at > self._fetched_at:
                    return  # the last try failed a moment ago: do not hammer the issuer
            self._tried_at = self._now()
            self.fetches += 1
            try:
                keys = await self._fetch()
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
                log.warning(
                    "teams: fetching the signing keys from %s failed: %s: %s",
                    self.metadata_url,
                    type(exc).__name__,
                    exc,
                )
                return
            self._keys = keys
            self._fetched_at = self._now()

    async def _fetch(self) -> dict[str, SigningKey]:
        # Through the proxy the process's environment names, by curl's NO_PROXY rules.
        async with http_session(self.proxies, timeout_seconds=self.timeout) as session:
            async with session.get(self.metadata_url) as resp:
                resp.raise_for_status()
                jwks_uri = (await resp.json(content_type=None))["jwks_uri"]
            if not isinstance(jwks_uri, str):
                raise TypeError("jwks_uri is not a string")
            async with session.get(jwks_uri) as resp:
                resp.raise_for_status()
                published = (await resp.json(content_type=None))["keys"]
        keys: dict[str, SigningKey] = {}
        for entry in published:
            if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str):
                continue
            try:
                public_key = RSAAlgorithm.from_jwk(json.dumps(entry))
            except (jwt.InvalidKeyError, ValueError, KeyError):
                continue  # a key type we do not use
            endorsements = entry.get("endorsements")
            keys[entry["kid"]] = SigningKey(
                public_key, list(endorsements) if isinstance(endorsements, list) else []
            )
        return keys


class TokenGate:
    """``check`` the Authorization header of a request to a bot with ``app_id``."""

    def __init__(self, app_id: str, issuer: str, keys: SigningKeys) -> None:
        self.app_id = app_id
        self.issuer = issuer
        self.keys = keys

    async def check(self, auth_header: str) -> dict[str, Any]:
        """The token's claims, or ``NotAuthenticated``. The issuer is read before anything
        is fetched: a token from anyone else costs no request to anyone."""
        scheme, _, bearer = auth_header.partition(" ")
        if scheme != "Bearer" or not bearer or " " in bearer:
            raise NotAuthenticated("no Bearer token")
        try:
            header = jwt.get_unverified_header(bearer)
            unverified = jwt.decode(bearer, options={"verify_signature": False})
        except jwt.PyJWTError as exc:
            raise NotAuthenticated(f"not a JWT: {exc}") from exc
        if unverified.get("iss") != self.issuer:
            raise NotAuthenticated(f"issuer {str(unverified.get('iss'))[:100]!r} not configured")
        if header.get("alg") not in ALGORITHMS:
            raise NotAuthenticated(f"signing algorithm {header.get('alg')!r} not allowed")
        kid = header.get("kid")
        try:
            key = await self.keys.get(kid if isinstance(kid, str) else None)
            claims: dict[str, Any] = jwt.decode(
                bearer,
                key.public_key,
                algorithms=list(ALGORITHMS),
                audience=self.app_id,
                issuer=self.issuer,
                leeway=CLOCK_TOLERANCE,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (PermissionError, jwt.PyJWTError) as exc:
            raise NotAuthenticated(f"{type(exc).__name__}: {exc}") from exc
        return claims


__all__ = ["NotAuthenticated", "SigningKey", "SigningKeys", "TokenGate"]
