"""API tokens: created, listed and revoked by ``signoff token``, looked up by the API's and the
console's sign-in, and the local admin's one-time link. Only hashes are kept (``bot.tokens``
makes and hashes the values)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from engine.domain.model import ApiToken, Role


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

    def __init__(self, store: TokenStore) -> None:
        self._store = store

    async def create(
        self, name: str, role: Role, person: str | None, token_hash: str, now: datetime
    ) -> ApiToken:
        """A new token (``Conflict`` when the name is taken)."""
        return await self._store.create_token(name, role, person, token_hash, now)

    async def put(
        self, name: str, role: Role, person: str | None, token_hash: str, now: datetime
    ) -> ApiToken:
        """Create the token or replace its value, active again (the local admin's link)."""
        return await self._store.put_token(name, role, person, token_hash, now)

    async def all(self) -> list[ApiToken]:
        return await self._store.list_tokens()

    async def revoke(self, name: str, now: datetime) -> None:
        await self._store.revoke_token(name, now)

    async def by_hash(self, token_hash: str) -> ApiToken | None:
        """The active token with this hash (an API request's or a sign-in's)."""
        return await self._store.token_by_hash(token_hash)

    async def active(self, name: str) -> ApiToken | None:
        """The token named ``name`` if it is not revoked (a console session's check)."""
        return await self._store.active_token(name)

    async def rotate(self, name: str, token_hash: str, new_hash: str) -> ApiToken | None:
        """Swap the value of the token ``name`` if it is ``token_hash`` (a one-time link)."""
        return await self._store.rotate_token(name, token_hash, new_hash)
