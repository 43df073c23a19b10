"""Bodies that only ``/openapi.json`` promises to refuse, against a real ``signoff serve``
(issue 29, item 10): schemathesis found workflow nodes like ``{"": {}}`` and gate ``samples``
of 9.6e30 allowed by the document and refused by the server. Now the document refuses them, and
the server refuses them as it says: a 400 ``invalid_request`` naming the path, nothing stored.

The workflow schema is checked in Python, node by node; the largest bodies it allows and the
longest lists it refuses are sent here while ``/healthz`` is polled: it must answer within 1 s
throughout (``watching``), and the worst round trip is printed (``-s``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from engine.config.workflow_schema import MAX_NAMES, MAX_NODES
from tests.reliability.hostile import (  # latency_report: the module's worst /healthz, printed
    assert_refused,
    latency_report,  # noqa: F401
    send,
    watching,
)
from tests.reliability.served import Target

APPROVAL = {"type": "approval", "reason": "r" * 200, "timeoutMinutes": 60}
# Mixed types make jsonschema's uniqueItems quadratic: the list bound keeps it short.
MIXED = [i if i % 2 else f"p{i}" for i in range(MAX_NAMES)]
FULL_NODE = {
    **APPROVAL,
    "approvers": [f"p{i}" for i in range(MAX_NAMES)],
    "escalateTo": [f"q{i}" for i in range(MAX_NAMES)],
    "escalateAfterMinutes": 30,
}


def workflow(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "hostile", "nodes": nodes}


# name -> (method, path, token, body, status, words in the message)
CASES: dict[str, tuple[str, str, str, Any, int, str]] = {
    "a node with an empty key": (
        "POST", "/v1/workflows", "admin", workflow([{"": {}}]), 400, "body.nodes[0]",
    ),
    "100,000 nodes": (
        "POST", "/v1/workflows", "admin", workflow([{}] * 100_000), 400, "is too long",
    ),
    "100,000 approvers on one node": (
        "POST", "/v1/workflows", "admin",
        workflow([{**APPROVAL, "id": "a", "approvers": MIXED * 2_000}]), 400, "is too long",
    ),
    f"{MAX_NODES} nodes of {MAX_NAMES} mixed-type approvers": (
        "POST", "/v1/workflows", "admin",
        workflow([{**APPROVAL, "id": f"n{i}", "approvers": MIXED} for i in range(MAX_NODES)]),
        400, "is not of type 'string'",
    ),
    f"{MAX_NODES} full nodes, the last next naming no node": (
        "POST", "/v1/workflows", "admin",
        workflow(
            [{**FULL_NODE, "id": f"n{i}"} for i in range(MAX_NODES - 1)]
            + [{**FULL_NODE, "id": "last", "next": "nowhere"}]
        ),
        422, 'no node has id "nowhere"',
    ),
    "gate samples 9.6e30": ("PATCH", "/v1/gate", "admin", {"samples": 9.6e30}, 400, "outside"),
    "a run body of 250,000 empty objects and an unknown key": (
        "POST", "/v1/runs", "agent",
        {"workflow": "pay", "input": {"a": [{}] * 250_000}, "bogus": 1}, 400, "bogus",
    ),
    "a run input of 1e19": (
        "POST", "/v1/runs", "agent", {"workflow": "pay", "input": {"n": 1e19}}, 400, "outside",
    ),
}  # fmt: skip


@pytest.fixture
def schema_target(request: pytest.FixtureRequest, target: Target) -> Iterator[Target]:
    with watching(request.node.name, target):
        yield target


@pytest.mark.parametrize("case", sorted(CASES))
def test_what_the_document_refuses_the_server_refuses(case: str, schema_target: Target) -> None:
    method, path, token, body, status, words = CASES[case]
    raw = json.dumps(body).encode()
    assert len(raw) < 1024 * 1024, len(raw)  # under the body limit: the schema refuses it
    got, _, answer = send(schema_target, method, path, raw, token, timeout=10)
    error = assert_refused(got, answer, status)
    assert error["error"] == ("invalid_config" if status == 422 else "invalid_request"), error
    assert words in error["message"], error["message"][:300]
