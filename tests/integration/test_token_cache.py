"""A serving process keeps the tokens it found for a second (``engine.services.tokens``): a
token revoked elsewhere stops working within that time, one changed here stops at once."""

from __future__ import annotations

import pytest

from bot.tokens import hash_token
from engine.adapters.store import SqlStore
from engine.domain.model import Role
from engine.services import tokens as tokens_module
from engine.services.tokens import CACHE_SECONDS, Tokens
from tests.support.clock import ManualClock


class CountingStore:
    """The store, counting token reads."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.reads = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    async def token_by_hash(self, token_hash: str) -> object:
        self.reads += 1
        return await self.store.token_by_hash(token_hash)


async def test_a_token_found_is_not_read_again_within_the_second(store: SqlStore) -> None:
    clock = ManualClock()
    counting = CountingStore(store)
    tokens = Tokens(counting, clock)  # type: ignore[arg-type]
    await tokens.create("agent", Role.AGENT, None, hash_token("secret"), clock.now())
    for _ in range(5):
        found = await tokens.by_hash(hash_token("secret"))
        assert found is not None and found.name == "agent"
    assert counting.reads == 1
    clock.advance(seconds=CACHE_SECONDS)
    assert await tokens.by_hash(hash_token("secret")) is not None
    assert counting.reads == 2


async def test_a_token_revoked_by_another_process_stops_within_the_second(
    store: SqlStore,
) -> None:
    clock = ManualClock()
    tokens = Tokens(store, clock)
    await tokens.create("agent", Role.AGENT, None, hash_token("secret"), clock.now())
    assert await tokens.by_hash(hash_token("secret")) is not None
    await Tokens(store).revoke("agent", clock.now())  # ``signoff token revoke``
    clock.advance(seconds=CACHE_SECONDS / 2)
    assert await tokens.by_hash(hash_token("secret")) is not None  # the documented delay
    clock.advance(seconds=CACHE_SECONDS / 2)
    assert await tokens.by_hash(hash_token("secret")) is None


async def test_a_token_revoked_or_rotated_here_stops_at_once(store: SqlStore) -> None:
    clock = ManualClock()
    tokens = Tokens(store, clock)
    await tokens.create("agent", Role.AGENT, None, hash_token("a"), clock.now())
    await tokens.create("admin", Role.ADMIN, None, hash_token("b"), clock.now())
    assert await tokens.by_hash(hash_token("a")) is not None
    assert await tokens.by_hash(hash_token("b")) is not None
    await tokens.revoke("agent", clock.now())
    assert await tokens.by_hash(hash_token("a")) is None
    await tokens.rotate("admin", hash_token("b"), hash_token("c"))
    assert await tokens.by_hash(hash_token("b")) is None
    assert (await tokens.by_hash(hash_token("c"))) is not None


async def test_a_lookup_that_raced_a_revocation_is_not_kept(store: SqlStore) -> None:
    clock = ManualClock()
    revoking = CountingStore(store)
    tokens = Tokens(revoking, clock)  # type: ignore[arg-type]
    await tokens.create("agent", Role.AGENT, None, hash_token("a"), clock.now())

    async def read_then_revoke(token_hash: str) -> object:
        found = await store.token_by_hash(token_hash)  # read before the revocation commits
        await tokens.revoke("agent", clock.now())  # another request, through this process
        return found

    revoking.token_by_hash = read_then_revoke  # type: ignore[method-assign]
    assert await tokens.by_hash(hash_token("a")) is not None  # the read that raced
    revoking.token_by_hash = store.token_by_hash  # type: ignore[method-assign]
    assert await tokens.by_hash(hash_token("a")) is None  # not kept: the revocation is read


async def test_unknown_values_are_not_kept_and_the_cache_is_bounded(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens_module, "CACHE_SIZE", 4)
    clock = ManualClock()
    counting = CountingStore(store)
    tokens = Tokens(counting, clock)  # type: ignore[arg-type]
    assert await tokens.by_hash(hash_token("nobody")) is None
    assert await tokens.by_hash(hash_token("nobody")) is None
    assert counting.reads == 2
    for i in range(6):
        await tokens.create(f"t{i}", Role.AGENT, None, hash_token(f"v{i}"), clock.now())
    for i in range(6):
        assert await tokens.by_hash(hash_token(f"v{i}")) is not None
    assert counting.reads == 2 + 6
    for i in (2, 3, 4, 5):  # the last four are kept
        await tokens.by_hash(hash_token(f"v{i}"))
    assert counting.reads == 2 + 6
    await tokens.by_hash(hash_token("v0"))  # the oldest went first
    assert counting.reads == 2 + 6 + 1
