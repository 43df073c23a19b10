"""Signed approval links: a URL that lets one person decide one request, once, until it expires.

``{publicUrl}/approvals/{id}?p=<person>&exp=<unix>&sig=<hex>``: ``sig`` is HMAC-SHA256, keyed by
``server.secretKey``, over the request id, the person and the expiry, so none of them can be
changed. ``exp`` is the request's own ``expiresAt``: the link expires with the request. These
links are what chat messages, webhooks and ``signoff demo`` hand out; the plain ``approvalUrl``
of the API carries no person and only shows the request (deciding there needs a console
session).

Deciding: a link's decision is an ``Approvals`` decision (``engine.services.approvals``, the one
place that says who may decide and how a decision is applied) by the link's person; what is
the link's own is checked here: its signature, its expiry, and its single use.

Single use: a decision through a link is recorded in ``link_uses`` in the decision's own
transaction (``PageStore.with_link_use``), keyed by (request, person). A second decision through
it raises ``engine.domain.errors.LinkUsed``; only *Release* may follow a *Take over* made
through the same link, because a taken-over request waits for exactly that. A decision that
loses a race (someone else decided first) rolls its use back with it: nothing happened through
the link.

With an empty secret key every process signs with a random key of its own (``Signer``): links
work until the server restarts, and another process (``signoff demo``) cannot sign links this
server accepts. The server warns at start.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote, urlencode

from engine.domain.errors import Forbidden, Gone, InvalidRequest, LinkUsed
from engine.domain.model import Principal, TakeoverRequest
from engine.domain.records import LinkUse
from engine.services.approvals import Approvals

if TYPE_CHECKING:
    from engine.config import AppConfig
    from engine.ports import Clock
    from engine.ports.store import Store

__all__ = ["ApprovalLink", "ApprovalLinks", "LinkHost", "LinkUse", "LinkUsed", "Signer"]

VERBS = ("grant", "deny", "takeover", "release")  # the cards' button values
_PROCESS_KEY = secrets.token_bytes(32)  # one per process, shared by every Signer in it
_LAST_SECOND = 253_402_300_799  # 9999-12-31T23:59:59Z, the last time datetime can hold


class Signer:
    """HMAC-SHA256 over a purpose and a list of text parts (JSON-encoded, so no two lists of
    parts sign the same message). One key per deployment: ``server.secretKey``."""

    def __init__(self, secret_key: str) -> None:
        self.ephemeral = not secret_key
        self._key = secret_key.encode() if secret_key else _PROCESS_KEY

    def sign(self, purpose: str, *parts: str) -> str:
        message = json.dumps([purpose, *parts], separators=(",", ":")).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def verify(self, signature: str, purpose: str, *parts: str) -> bool:
        return hmac.compare_digest(self.sign(purpose, *parts), signature)


@dataclass(frozen=True, slots=True)
class ApprovalLink:
    """A verified link: ``person`` may decide ``request_id`` until ``expires``."""

    request_id: str
    person: str
    expires: datetime
    signature: str

    @property
    def query(self) -> str:
        return urlencode(
            {"p": self.person, "exp": str(int(self.expires.timestamp())), "sig": self.signature}
        )

    def expired(self, now: datetime) -> bool:
        return now >= self.expires


class LinkHost(Protocol):
    """What signing and deciding through links needs of the engine (``engine.assembly.Engine``
    is one): its configuration, store and clock, the approvals' one rule of who may decide,
    and the wake-up of workers once a decision is made."""

    @property
    def config(self) -> AppConfig: ...

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def approvals(self) -> Approvals: ...

    def principal_for_person(self, person: str) -> Principal: ...

    def wake(self) -> None: ...


class ApprovalLinks:
    """Signing and checking approval links, and deciding through them."""

    PURPOSE = "approval-link"

    def __init__(self, engine: LinkHost, signer: Signer) -> None:
        self.engine = engine
        self.signer = signer
        self.public_url = engine.config.server.public_url.rstrip("/")

    # -- signing -------------------------------------------------------------------------------

    def sign(self, request: TakeoverRequest, person: str) -> ApprovalLink:
        expires = datetime.fromtimestamp(int(request.expires_at.timestamp()), UTC)
        stamp = str(int(expires.timestamp()))
        signature = self.signer.sign(self.PURPOSE, request.id, person, stamp)
        return ApprovalLink(request.id, person, expires, signature)

    def url(self, request: TakeoverRequest, person: str) -> str:
        """The absolute link for ``person`` (what chat messages and webhooks carry)."""
        link = self.sign(request, person)
        return f"{self.public_url}/approvals/{quote(request.id, safe='')}?{link.query}"

    def deciders(self, request: TakeoverRequest) -> tuple[str, ...]:
        """The people a link is worth signing for: the request's approvers (the project's
        default approvers when it names none), less those who may not decide it."""
        config = self.engine.config
        people = request.approvers or config.expand_people(config.approvers) or tuple(config.people)
        refusal = self.engine.approvals.refusal
        return tuple(
            p for p in people if refusal(request, self.engine.principal_for_person(p)) is None
        )

    def urls(self, request: TakeoverRequest, people: Iterable[str] | None = None) -> dict[str, str]:
        chosen = self.deciders(request) if people is None else people
        return {person: self.url(request, person) for person in chosen}

    # -- checking ------------------------------------------------------------------------------

    def parse(self, request_id: str, query: Mapping[str, str]) -> ApprovalLink | None:
        """The link in a query string; None when it carries none. A link that was altered, or
        signed with another key, raises ``Forbidden``. (Expiry is the caller's to judge: an
        expired link still shows what happened.)"""
        person, stamp, signature = query.get("p"), query.get("exp"), query.get("sig")
        if person is None and stamp is None and signature is None:
            return None
        if not person or not stamp or not stamp.isdigit() or not signature:
            raise Forbidden("this approval link is incomplete", request_id=request_id)
        if not self.signer.verify(signature, self.PURPOSE, request_id, person, stamp):
            why = "this approval link is not valid"
            if self.signer.ephemeral:
                why += " (the server restarted without server.secretKey, so old links died)"
            raise Forbidden(why, request_id=request_id)
        expires = datetime.fromtimestamp(min(int(stamp), _LAST_SECOND), UTC)
        return ApprovalLink(request_id, person, expires, signature)

    # -- deciding ------------------------------------------------------------------------------

    async def decide(
        self, link: ApprovalLink, verb: str, notes: str | None = None
    ) -> TakeoverRequest:
        """``verb`` (grant = approve, deny, takeover, release) by the link's person, decided
        as every decision is (``engine.services.approvals``: who may, and what it does), with
        the link's single use recorded in the decision's transaction. The link's own checks
        come first: a known verb, and not expired (its taker may release after that)."""
        if verb not in VERBS:
            raise InvalidRequest(f"unknown action {verb!r}")
        engine = self.engine
        now = engine.clock.now()
        # The use's row refers to the request: a request that does not exist is NotFound here.
        request = await engine.store.get_takeover(link.request_id)
        if verb != "release" and link.expired(now):
            raise Gone("this approval link has expired", request_id=request.id)
        notes = (notes or "").strip() or None
        who = engine.principal_for_person(link.person)
        use = LinkUse(request.id, link.person, verb, now)
        approvals = engine.approvals
        if verb == "deny":
            return await approvals.deny(request.id, who, notes=notes, link=use)
        if verb == "release":
            return await approvals.release(request.id, who, link=use)
        release = verb == "grant"
        return await approvals.grant(request.id, who, notes=notes, release=release, link=use)

    async def use_of(self, link: ApprovalLink) -> LinkUse | None:
        return await self.engine.store.link_use(link.request_id, link.person)
