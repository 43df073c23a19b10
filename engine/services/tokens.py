"""API tokens: created, listed and revoked by ``signoff token``, looked up by the API's and the
console's sign-in, and the local admin's one-time link. Only hashes are kept (``bot.tokens``
makes and hashes the values).

Every API request names its token, and reading it was a quarter of the server's time under
load (py-spy on ``signoff serve``, 64 requests in flight). A serving process therefore keeps
the tokens it found for ``CACHE_SECONDS`` on its clock: a token revoked by ``signoff token
revoke`` (another process) stops working within that time on every replica; one revoked,
replaced or rotated through this process stops at once. Only tokens found are kept (an
unknown value is read every time), at most ``CACHE_SIZE`` of them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from engine.domain.model import ApiToken, Role
from engine.ports import Clock

CACHE_SECONDS = 1.0
CACHE_SIZE = 1024


class TokenStore(Protocol):
    """The store's token records."""

    async def create_token(
        self, name: str, role: Role, person: str | None, token_hash: str, now: datetime
    ) -> ApiToken: ...
    async def put_token(
        self, name: str, role: Role, person: str | None, token_hash: str, now: datetime
    ) -> ApiToken: ...
    async def list_tokens(self) -> list[ApiToken]: ...
    async def revoke_token(self, name: str, now: datetime) -> None: ...
    async def token_by_hash(self, token_hash: str) -> ApiToken | None: ...
    async def active_token(self, name: str) -> ApiToken | None: ...
    async def rotate_token(self, name: str, token_hash: str, new_hash: str) -> ApiToken | None: ...


class Tokens:
    """The API tokens' use cases, on a ``TokenStore``."""

    def __init__(self, store: TokenStore, clock: Clock | None = None) -> None:
        """With a ``clock``, tokens found are kept for ``CACHE_SECONDS`` (a serving process);
        without one, every lookup reads the store (a command)."""
        self._store = store
        self._clock = clock
        self._found: dict[str, tuple[ApiToken, datetime]] = {}  # hash -> token, kept until
        self._keep = timedelta(seconds=CACHE_SECONDS)
        self._changes = 0  # tokens changed through this process: a read begun before is not kept

    def forget(self) -> None:
        """Read every token again (tokens changed, or the people they name were reloaded)."""
        self._found.clear()
        self._changes += 1

    async def create(
        self, name: str, role: Role, person: str | None, token_hash: str, now: datetime
    ) -> ApiToken:
        """A new token (``Conflict`` when the name is taken)."""
        return await self._store.create_token(name, role, person, token_hash, now)

    async def put(
        self, name: str, role: Role, person: str | None, token_hash: str, now: datetime
    ) -> ApiToken:
        """Create the token or replace its value, active again (the local admin's link)."""
        try:
            return await self._store.put_token(name, role, person, token_hash, now)
        finally:
            self.forget()

    async def all(self) -> list[ApiToken]:
        return await self._store.list_tokens()

    async def revoke(self, name: str, now: datetime) -> None:
        try:
            await self._store.revoke_token(name, now)
        finally:
            self.forget()

    async def by_hash(self, token_hash: str) -> ApiToken | None:
        """The active token with this hash (an API request's or a sign-in's); one found in
        the last ``CACHE_SECONDS`` is not read again."""
        if self._clock is None:
            return await self._store.token_by_hash(token_hash)
        now = self._clock.now()
        kept = self._found.get(token_hash)
        if kept is not None and now < kept[1]:
            return kept[0]
        changes = self._changes
        token = await self._store.token_by_hash(token_hash)
        self._found.pop(token_hash, None)
        if token is not None and changes == self._changes:  # no change while it was read
            if len(self._found) >= CACHE_SIZE:
                del self._found[next(iter(self._found))]  # the oldest
            self._found[token_hash] = (token, now + self._keep)
        return token

    async def active(self, name: str) -> ApiToken | None:
        """The token named ``name`` if it is not revoked (a console session's check)."""
        return await self._store.active_token(name)

    async def rotate(self, name: str, token_hash: str, new_hash: str) -> ApiToken | None:
        """Swap the value of the token ``name`` if it is ``token_hash`` (a one-time link)."""
        try:
            return await self._store.rotate_token(name, token_hash, new_hash)
        finally:
            self.forget()
