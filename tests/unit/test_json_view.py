"""``cards.json_view``: the approval view as the webhook's JSON, raw values, real arguments."""

from __future__ import annotations

import json

from cards.json_view import view_json
from cards.samples import SAMPLE_ARGS, SAMPLE_NOW, sample_request, sample_run
from cards.view import build_view


def test_every_card_fact_is_in_the_json() -> None:
    view = build_view(
        sample_request("pending"),
        sample_run(),
        approval_url="https://signoff.example.com/approvals/tk_7f3a9c",
        run_url=None,
        now=SAMPLE_NOW,
    )

    doc = view_json(view)

    assert json.loads(json.dumps(doc)) == doc
    assert doc["requestId"] == "tk_7f3a9c" and doc["status"] == "pending"
    assert doc["arguments"] == SAMPLE_ARGS  # the value itself, not a rendering
    assert doc["actions"] == ["grant", "deny", "takeover"]
    assert doc["expiresAt"].endswith("Z") and doc["expiresInMinutes"] == 29
    assert doc["approvalUrl"] == "https://signoff.example.com/approvals/tk_7f3a9c"
    assert doc["quorum"] == view.quorum
    assert set(doc) >= {"confidence", "policy", "approvals", "bindingHash", "decidedBy"}


def test_a_decided_request_has_no_actions() -> None:
    view = build_view(sample_request("denied"), sample_run(), approval_url=None, run_url=None)

    doc = view_json(view)

    assert doc["actions"] == [] and doc["status"] == "denied"
    assert doc["decidedBy"] == view.decided_by and doc["notes"] == view.notes
