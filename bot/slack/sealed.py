"""Slack tokens encrypted at rest: what the installation tables hold instead of a token.

A token is sealed with AES-256-GCM (``cryptography``) under a key derived by HKDF-SHA256 from
``server.secretKey``, with the workspace it belongs to (``enterprise:team``) as associated
data, so a sealed token copied onto another workspace's row does not open. The stored form is
``sealed1:`` + base64url(nonce | ciphertext | tag): 28 bytes over the token, which keeps a bot
token well inside slack_sdk's ``String(200)`` columns. A value without the prefix is refused
(``Unsealed``): a token written in clear by something else is never used.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PREFIX = "sealed1:"
NONCE_BYTES = 12
_INFO = b"signoff slack tokens v1"


class Unsealed(ValueError):
    """A stored value that is not a token this key sealed (tampered, or another key's)."""


class TokenSeal:
    """Seals and opens tokens with a key derived from ``server.secretKey``."""

    def __init__(self, secret_key: str) -> None:
        if not secret_key:
            raise ValueError("a secret key is required to seal Slack tokens")
        kdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO)
        self._aead = AESGCM(kdf.derive(secret_key.encode()))

    def seal(self, token: str | None, workspace: str) -> str | None:
        if token is None:
            return None
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, token.encode(), workspace.encode())
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")

    def open(self, value: str | None, workspace: str) -> str | None:
        if value is None:
            return None
        if not value.startswith(PREFIX):
            raise Unsealed(f"a stored Slack token of {workspace} is not sealed")
        raw = value[len(PREFIX) :]
        try:
            data = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
            opened = self._aead.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], workspace.encode())
        except (InvalidTag, ValueError, binascii.Error) as exc:
            raise Unsealed(f"a stored Slack token of {workspace} does not open") from exc
        return opened.decode()
