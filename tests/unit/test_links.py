"""Signed approval links: what is signed, what a changed link is, who a link is signed for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest

from engine.assembly import Engine
from engine.domain.errors import Forbidden
from engine.domain.model import TakeoverKind, TakeoverRequest, TakeoverStatus
from engine.services.links import ApprovalLinks, Signer
from tests.support.engines import make_engine

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
REQUEST = TakeoverRequest(
    id="tk-1",
    run_id="run-1",
    step_id="approve",
    kind=TakeoverKind.NODE,
    status=TakeoverStatus.PENDING,
    reason="Refund",
    created_at=NOW,
    expires_at=NOW + timedelta(minutes=30, microseconds=250),
    approvers=("alice", "bob"),
    requested_by="bob",
)


@pytest.fixture
async def engine(sqlite_url: str) -> AsyncIterator[Engine]:
    engine = make_engine(sqlite_url, "noop: {nodes: [{id: a, type: approval}]}")
    try:
        yield engine
    finally:
        await engine.stop()


def _query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


def test_a_signature_covers_every_part_and_the_purpose() -> None:
    signer = Signer("key")
    signature = signer.sign("approval-link", "tk-1", "bob", "100")
    assert signer.verify(signature, "approval-link", "tk-1", "bob", "100")
    assert not signer.verify(signature, "approval-link", "tk-1", "bob", "101")
    assert not signer.verify(signature, "session", "tk-1", "bob", "100")
    # parts are JSON-encoded: moving a separator does not give the same message
    assert signer.sign("p", "a,b", "c") != signer.sign("p", "a", "b,c")
    assert not Signer("other").verify(signature, "approval-link", "tk-1", "bob", "100")


def test_without_a_secret_key_each_process_has_a_random_key() -> None:
    assert Signer("").ephemeral and not Signer("key").ephemeral
    assert Signer("").sign("p", "x") == Signer("").sign("p", "x")  # the same in one process
    assert Signer("").sign("p", "x") != Signer("key").sign("p", "x")


async def test_a_link_expires_with_its_request_and_parses_back(engine: Engine) -> None:
    links = ApprovalLinks(engine, Signer("key"))
    url = links.url(REQUEST, "alice")

    assert url.startswith("http://127.0.0.1:8080/approvals/tk-1?")
    query = _query(url)
    assert query["p"] == "alice"
    assert int(query["exp"]) == int(REQUEST.expires_at.timestamp())
    link = links.parse("tk-1", query)
    assert link is not None and link.person == "alice"
    assert not link.expired(REQUEST.expires_at - timedelta(seconds=1))
    assert link.expired(REQUEST.expires_at)


async def test_changed_or_incomplete_links_are_refused(engine: Engine) -> None:
    links = ApprovalLinks(engine, Signer("key"))
    query = _query(links.url(REQUEST, "alice"))

    assert links.parse("tk-1", {}) is None
    for changed in (
        {**query, "p": "bob"},
        {**query, "exp": str(int(query["exp"]) + 3600)},
        {**query, "sig": "0" * 64},
        {"p": "alice", "exp": query["exp"]},
        {**query, "exp": "soon"},
    ):
        with pytest.raises(Forbidden):
            links.parse("tk-1", changed)
    with pytest.raises(Forbidden):
        links.parse("tk-2", query)
    with pytest.raises(Forbidden):
        ApprovalLinks(engine, Signer("rotated")).parse("tk-1", query)


async def test_links_are_signed_for_those_who_may_decide(engine: Engine) -> None:
    links = ApprovalLinks(engine, Signer("key"))

    assert links.deciders(REQUEST) == ("alice",)  # bob started the run
    anyone = replace(REQUEST, approvers=(), requested_by="token:agent")
    assert links.deciders(anyone) == ("alice", "bob", "carol")  # approvers: [finance]
    assert sorted(links.urls(anyone)) == ["alice", "bob", "carol"]
