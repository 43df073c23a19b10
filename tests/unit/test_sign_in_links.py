"""The one-time sign-in link's story read from the token's value alone: valid, used (its spent
mark), replaced (any other value) or inactive (no active token), on a token store in memory."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bot.tokens import LOCAL_ADMIN, hash_token, new_token
from engine.domain.model import ApiToken, Role
from engine.services.sign_in_links import SignInRefusal, once_refusal, spend_once, spent_mark
from engine.services.tokens import Tokens

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class MemoryTokens:
    """The part of ``TokenStore`` the sign-in link uses: name -> (token, value's hash)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[ApiToken, str]] = {}

    async def put_token(
        self, name: str, role: Role, person: str | None, token_hash: str, now: datetime
    ) -> ApiToken:
        self.rows[name] = (ApiToken(name, role, person, now), token_hash)
        return self.rows[name][0]

    async def active_token(self, name: str) -> ApiToken | None:
        row = self.rows.get(name)
        return row[0] if row is not None and row[0].revoked_at is None else None

    async def token_by_hash(self, token_hash: str) -> ApiToken | None:
        found = [t for t, h in self.rows.values() if h == token_hash and t.revoked_at is None]
        return found[0] if found else None

    async def rotate_token(self, name: str, token_hash: str, new_hash: str) -> ApiToken | None:
        token = await self.active_token(name)
        if token is None or self.rows[name][1] != token_hash:
            return None
        self.rows[name] = (token, new_hash)
        return token

    async def revoke_token(self, name: str, now: datetime) -> None:
        self.rows[name] = (replace(self.rows[name][0], revoked_at=now), self.rows[name][1])


def test_a_spent_mark_fits_the_column_and_is_no_token_s_hash() -> None:
    value = hash_token(new_token())
    mark = spent_mark(value)
    assert len(mark) == len(value) == 64
    assert mark != value and not all(c in "0123456789abcdef" for c in mark)


@pytest.mark.parametrize(
    ("story", "refusal"),
    [
        ((), None),
        (("sign in",), SignInRefusal.USED),
        (("new link",), SignInRefusal.REPLACED),
        (("sign in", "new link"), SignInRefusal.REPLACED),  # only the newest story is kept
        (("revoke",), SignInRefusal.INACTIVE),
        (("sign in", "revoke"), SignInRefusal.INACTIVE),
    ],
    ids=lambda v: ", ".join(v) if isinstance(v, tuple) else str(v),
)
async def test_what_an_old_link_says(story: tuple[str, ...], refusal: SignInRefusal | None) -> None:
    store = MemoryTokens()
    tokens = Tokens(store)  # type: ignore[arg-type]  # the link needs only these methods
    link = hash_token(new_token())
    await tokens.put(LOCAL_ADMIN, Role.ADMIN, "alice", link, NOW)
    for step in story:
        if step == "sign in":
            assert await spend_once(tokens, LOCAL_ADMIN, link) is not None
        elif step == "new link":
            await tokens.put(LOCAL_ADMIN, Role.ADMIN, "alice", hash_token(new_token()), NOW)
        else:
            await tokens.revoke(LOCAL_ADMIN, NOW)
    assert await once_refusal(tokens, LOCAL_ADMIN, link) is refusal
    assert (await spend_once(tokens, LOCAL_ADMIN, link) is None) is (refusal is not None)
    if refusal is None:  # spent just now: it says used from then on
        assert await once_refusal(tokens, LOCAL_ADMIN, link) is SignInRefusal.USED
