"""API tokens: random, shown once, stored only as a SHA-256 hash (they are 256-bit random
secrets, so a fast hash is enough: there is nothing to brute-force)."""

from __future__ import annotations

import hashlib
import secrets

PREFIX = "so_"
LOCAL_ADMIN = "local-admin"  # the token whose value is the one-time console sign-in link


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
