"""The local admin's one-time sign-in link, on the API tokens (``engine.services.tokens``).

A one-time sign-in link is the value of one token (``local-admin``): a newer link replaces the
value, and signing in with it replaces the value with a *spent mark* of it (``spent_mark``), a
string no token's hash can equal (it is not hex). The mark is what tells a used link from one a
newer link replaced, with no record of its own: a link is *used* while the token's value is its
mark, and *replaced* once the value is anything else. A used link that a newer link then
replaced is told as replaced: only the newest link's story is kept. The story is read through
``Tokens``' lookups, so a server that keeps tokens it found for a moment may tell, for that
moment, the story of a link changed by another process as it was; signing in itself is one
conditional write (``Tokens.rotate``) and never spends a link twice.
"""

from __future__ import annotations

from enum import StrEnum

from engine.domain.model import ApiToken
from engine.services.tokens import Tokens

_SPENT = "spent:"


class SignInRefusal(StrEnum):
    """Why a one-time sign-in link no longer signs anyone in."""

    USED = "used"  # it signed someone in already
    REPLACED = "replaced"  # a newer link (signoff login-link, a restart of serve) took its place
    INACTIVE = "inactive"  # no link is active: the token was revoked, or never made


def spent_mark(token_hash: str) -> str:
    """What a spent one-time token's value becomes: its hash, marked. It fits the hash's column
    (64 characters) and, holding a colon, equals no ``hash_token`` output: nobody can sign in
    or call the API with it."""
    return _SPENT + token_hash[: 64 - len(_SPENT)]


async def spend_once(tokens: Tokens, name: str, token_hash: str) -> ApiToken | None:
    """Sign in once with the one-time token ``name`` if ``token_hash`` is still its value: the
    value becomes its spent mark. None when it is not (``once_refusal`` says why)."""
    return await tokens.rotate(name, token_hash, spent_mark(token_hash))


async def once_refusal(tokens: Tokens, name: str, token_hash: str) -> SignInRefusal | None:
    """Why the one-time token ``name`` with value ``token_hash`` no longer signs in; None while
    it does."""
    if await tokens.active(name) is None:
        return SignInRefusal.INACTIVE
    holder = await tokens.by_hash(token_hash)
    if holder is not None and holder.name == name:
        return None
    spent = await tokens.by_hash(spent_mark(token_hash))
    if spent is not None and spent.name == name:
        return SignInRefusal.USED
    return SignInRefusal.REPLACED
