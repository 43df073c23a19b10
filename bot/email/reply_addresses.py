"""Signed reply addresses: ``<local>+<token>@<domain>``, one per request and recipient, so that
a reply to an approval email says which request it answers and as whom, and nobody can make
one up (``server.secretKey`` signs it, as it signs approval links).

``token`` is the request id and an HMAC-SHA256 over (request id, person), cut to 80 bits, in
lowercase base32: 44 characters for a UUID request id, so the whole local part stays within
RFC 5321's 64. The person is not spelled in the address (a name can be long); reading it back
finds the one person of ``people:`` whose signature it carries (``ReplyAddresses.read``).
A reply address has no expiry of its own: the request's state decides what a reply can do.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from engine.services.links import Signer

PURPOSE = "email-reply"
MAC_BYTES = 10
_UUID, _TEXT = b"u", b"t"  # how the request id is packed: 16 bytes, or its UTF-8 text
MAX_LOCAL = 64  # RFC 5321 4.5.3.1.1


@dataclass(frozen=True)
class ReplyAddress:
    """A verified reply address: a reply to it decides ``request_id`` as ``person``."""

    request_id: str
    person: str


class ReplyAddresses:
    """Making and reading the reply addresses of one deployment's inbound domain."""

    def __init__(self, signer: Signer, local: str, domain: str) -> None:
        self.signer = signer
        self.local = local
        self.domain = domain.lower()

    def address(self, request_id: str, person: str) -> str:
        """The address ``person``'s copy of the email about ``request_id`` is answered to."""
        mac = bytes.fromhex(self.signer.sign(PURPOSE, request_id, person))[:MAC_BYTES]
        token = _spelled(_packed(request_id) + mac)
        return f"{self.local}+{token}@{self.domain}"

    def read(self, address: str, people: Iterable[str]) -> ReplyAddress | None:
        """The request and person ``address`` was made for, among ``people``; None when it is
        not one of this deployment's reply addresses, or was altered."""
        local, at, domain = address.strip().rpartition("@")
        if not at or domain.lower() != self.domain or len(local) > MAX_LOCAL:
            return None
        base, plus, token = local.partition("+")
        if not plus or base.lower() != self.local.lower() or not token.isalnum():
            return None
        try:
            raw = base64.b32decode(token.upper() + "=" * (-len(token) % 8))
        except (binascii.Error, ValueError):
            return None
        if len(raw) <= MAC_BYTES or _spelled(raw) != token.lower():
            return None  # too short, or another spelling of the same bits
        request_id, mac = _unpacked(raw[:-MAC_BYTES]), raw[-MAC_BYTES:]
        if request_id is None:
            return None
        for person in people:
            signed = bytes.fromhex(self.signer.sign(PURPOSE, request_id, person))[:MAC_BYTES]
            if hmac.compare_digest(signed, mac):
                return ReplyAddress(request_id, person)
        return None


def _spelled(raw: bytes) -> str:
    return base64.b32encode(raw).decode().rstrip("=").lower()


def _packed(request_id: str) -> bytes:
    try:
        found = uuid.UUID(request_id)
    except ValueError:
        return _TEXT + request_id.encode()
    if str(found) != request_id:  # another spelling of a UUID stays as written
        return _TEXT + request_id.encode()
    return _UUID + found.bytes


def _unpacked(raw: bytes) -> str | None:
    kind, rest = raw[:1], raw[1:]
    if kind == _UUID and len(rest) == 16:
        return str(uuid.UUID(bytes=rest))
    if kind == _TEXT and rest:
        try:
            return rest.decode()
        except UnicodeDecodeError:
            return None
    return None
