"""build_view reads the request, its run and the gate/policy details."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

from cards.samples import SAMPLE_NOW, sample_request, sample_run, sample_view
from cards.view import ApprovalView, build_view, safe_url
from engine.domain.model import TakeoverKind, TakeoverStatus, Vote


def test_sample_view_fields() -> None:
    view = sample_view("pending")
    assert view.request_id == "tk_7f3a9c" and view.run_id == "run_51d2e0"
    assert view.step_id == "refund" and view.kind is TakeoverKind.GATE
    assert (view.connector, view.action, view.account) == ("demo-ledger", "refund", "ledger-eu")
    assert (view.agent, view.workflow, view.node_type) == (
        "support-bot",
        "refund-demo",
        "connector",
    )
    assert view.title == "demo-ledger · refund"
    assert view.short_hash == "9c1e5f0a7b3d"
    assert view.confidence is not None
    assert view.confidence.detail == "2 of 5 samples said execute"
    assert view.confidence.decision == "divert"
    assert view.quorum == "1 of 2 approvals"
    assert view.actions == ("grant", "deny", "takeover") and not view.is_final
    assert view.expires_in_minutes == 29
    assert view.arguments_json is not None and view.arguments_json.startswith('{\n  "amount"')


def test_states_and_actions() -> None:
    assert sample_view("granted").actions == ("release",)
    for state in ("released", "denied", "expired", "cancelled"):
        view = sample_view(state)
        assert view.actions == () and view.is_final and view.expires_in_minutes is None


def test_details_win_over_run_and_malformed_details_are_left_out() -> None:
    request = replace(
        sample_request(),
        details={
            "args": {"a": 1},
            "summary": "Send 3 emails",
            "confidence": {"score": True, "threshold": "high", "estimator": 7},
            "policy": {"rule": "no decision"},
            "bindingHash": "abcdef0123456789abcdef",
        },
        requested_by=None,
    )
    view = build_view(request, sample_run(), approval_url=None, run_url=None)
    assert view.title == "Send 3 emails"
    assert view.agent == "support-bot" and view.workflow == "refund-demo"  # from the run
    assert view.requested_by == "carol"
    assert view.confidence is not None
    assert (view.confidence.score, view.confidence.threshold) == (None, None)
    assert view.confidence.estimator == "7" and view.confidence.decision is None
    assert view.policy is None
    assert view.short_hash == "abcdef012345"
    assert view.now is None and view.expires_in_minutes is None


def test_title_fallbacks() -> None:
    bare = replace(sample_request(), details={})
    assert build_view(bare, None, approval_url=None, run_url=None).title == "Approve step refund"
    manual = replace(bare, kind=TakeoverKind.MANUAL)
    title = build_view(manual, None, approval_url=None, run_url=None).title
    assert title == "Take over run run_51d2e0"
    assert build_view(bare, None, approval_url=None, run_url=None).arguments_json is None


def test_quorum_and_votes() -> None:
    request = replace(
        sample_request(),
        approvals_required=3,
        votes=(Vote("a", SAMPLE_NOW, None), Vote("b", SAMPLE_NOW, "ok")),
    )
    view = build_view(request, None, approval_url=None, run_url=None)
    assert view.quorum == "2 of 3 approvals"
    assert [v.person for v in view.approvals] == ["a", "b"]
    single = build_view(replace(request, approvals_required=1, votes=()), None,
                        approval_url=None, run_url=None)  # fmt: skip
    assert single.quorum == "0 of 1 approval"


def test_times_are_aware_utc() -> None:
    naive = datetime(2025, 1, 1, 12, 0)
    east = datetime(2025, 1, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    request = replace(
        sample_request(),
        created_at=naive,
        expires_at=east,
        status=TakeoverStatus.DENIED,
        decided_at=east,
    )
    view = build_view(request, None, approval_url=None, run_url=None, now=naive)
    assert view.created_at == datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    assert view.expires_at == datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    assert view.decided_at == view.expires_at


def test_safe_url() -> None:
    assert safe_url("https://signoff.example.com/a?b=1&c=2") is not None
    assert safe_url("HTTP://x.example") is not None
    for bad in ("javascript:alert(1)", "https://x/a|b", "https://x/<a>", "https://x y",
                "https://x/\u202e", "/relative", None, 42, "https://\u017f.example"):  # fmt: skip
        assert safe_url(bad) is None, bad


def test_cards_say_how_long_is_left_in_hours_and_minutes() -> None:
    from cards.slack.render import render_slack_card

    request = replace(sample_request("pending"), expires_at=SAMPLE_NOW + timedelta(minutes=1438))
    view = build_view(request, sample_run(), approval_url=None, run_url=None, now=SAMPLE_NOW)

    assert view.expires_in == "23 h 58 min"
    assert render_slack_card(view)["text"].endswith("(expires in 23 h 58 min)")


def test_cards_show_the_earlier_outputs_the_approval_rests_on() -> None:
    from cards.slack.render import render_slack_card
    from cards.teams.render import render_teams_card
    from cards.web.render import render_web_card

    lookup = {"amount": 37.51, "currency": "EUR", "order": "A-1042"}
    base = sample_request("pending")
    details = {**base.details, "stepOutputs": [{"stepId": "lookup", "output": lookup},
                                               {"stepId": 7}, "junk"]}  # fmt: skip
    view = build_view(replace(base, details=details), sample_run(), approval_url=None,
                      run_url=None, now=SAMPLE_NOW)  # fmt: skip

    assert [(o.step_id, o.output_json) for o in view.step_outputs] == [
        ("lookup", '{\n  "amount": 37.51,\n  "currency": "EUR",\n  "order": "A-1042"\n}')
    ]  # malformed entries left out
    slack = json.dumps(render_slack_card(view))
    assert "*Output of step lookup*" in slack and '\\"amount\\": 37.51' in slack
    teams = json.dumps(render_teams_card(view))
    assert "Output of step " in teams and '\\"currency\\": \\"EUR\\"' in teams
    web = render_web_card(view, csrf_token=None, form_action=None)
    assert "Output of step <code>lookup</code>" in web and "&#34;amount&#34;: 37.51" in web
    assert not sample_view("pending").step_outputs  # no details: no section


def test_an_admin_override_is_named_on_every_card() -> None:
    from cards.slack.render import render_slack_card
    from cards.teams.render import render_teams_card
    from cards.view import decider_text
    from cards.web.render import render_web_card
    from tests.unit.cards.cardchecks import assert_valid_teams

    for state, words in (("denied", "Denied by"), ("granted", "Taken over by")):
        request = sample_request(state)
        overridden = replace(
            request, details={**request.details, "override": {"by": "bob", "override": "admin"}}
        )
        view = build_view(overridden, sample_run(), approval_url=None, run_url=None)
        assert view.override == "admin override"
        slack = str(render_slack_card(view))
        assert f"{words} *bob* (admin override)" in slack, state
        teams = render_teams_card(view)
        assert_valid_teams(teams)
        assert "(admin override)" in str(teams)
        web = render_web_card(view, csrf_token="t", form_action="/x")
        assert f"{words} <strong>bob</strong> (admin override)" in web
        assert decider_text(overridden, "bob") == "bob (admin override)"
        plain = build_view(request, sample_run(), approval_url=None, run_url=None)
        assert plain.override is None and "override" not in str(render_slack_card(plain))
        assert decider_text(request, "bob") == "bob"
    # Only the decider's own override counts (a stale or foreign record is not shown).
    request = sample_request("denied")
    other = replace(
        request, details={**request.details, "override": {"by": "eve", "override": "admin"}}
    )
    assert build_view(other, sample_run(), approval_url=None, run_url=None).override is None


def _once_view(summary: str, reason: str) -> ApprovalView:
    request = sample_request()
    request = replace(request, reason=reason, details={**request.details, "summary": summary})
    return build_view(request, sample_run(), approval_url=None, run_url=None)


def test_a_title_and_reason_that_say_the_same_are_shown_once_on_every_card() -> None:
    from cards.slack.render import render_slack_card
    from cards.teams.render import render_teams_card
    from cards.web.render import render_web_card

    line = "Send email to 1 recipient"
    for summary, reason, title in (
        (line, line, line),  # a held call without the agent's own reason
        (line, " send EMAIL to 1 recipient. ", line),  # the same, but for case and spacing
        (line, "to 1 recipient", line),  # the reason says less
        (line, f"{line} from ops", f"{line} from ops"),  # it says more: it is the title
    ):
        view = _once_view(summary, reason)
        assert (view.title, view.reason) == (title, ""), reason
        slack = json.dumps(render_slack_card(view)["blocks"])  # "text": the notification
        teams = json.dumps(render_teams_card(view)["body"])  # as "fallbackText"
        web = render_web_card(view, csrf_token=None, form_action=None)
        for card in (slack, teams, web):
            assert card.count("recipient") == 1, (reason, card)
    # Different words, or a reason too long for a title, keep both.
    view = _once_view(line, "Newsletter for March")
    assert (view.title, view.reason) == (line, "Newsletter for March")
    long = line + " x" * 200
    assert (_once_view(line, long).title, _once_view(line, long).reason) == (line, long)


def test_an_admin_override_short_of_the_quorum_is_not_counted_as_an_approval() -> None:
    """Issue 31: a 2-of-2 quorum with bob's approval, then alice's admin override, read
    "2 of 2 approvals" and "Approved by alice, bob" on every card."""
    from cards.notice_fields import decision_fields
    from cards.slack.render import render_slack_card
    from cards.teams.render import render_teams_card
    from cards.web.render import render_web_card

    base = sample_request("pending")  # alice (one of its approvers) has approved
    request = replace(
        base,
        approvers=("bob", "carol"),
        votes=(Vote("bob", SAMPLE_NOW, None), Vote("alice", SAMPLE_NOW, None)),
        status=TakeoverStatus.RELEASED,
        decided_by="alice",
        decided_at=SAMPLE_NOW,
        released_by="alice",
        released_at=SAMPLE_NOW,
        details={**base.details, "override": {"by": "alice", "override": "admin"}},
    )
    view = build_view(request, sample_run(), approval_url=None, run_url=None)
    said = "1 of 2, decided by alice's admin override"
    assert view.quorum == said and [a.person for a in view.counted] == ["bob"]
    slack = json.dumps(render_slack_card(view), ensure_ascii=False)
    teams = json.dumps(render_teams_card(view), ensure_ascii=False)
    web = render_web_card(view, csrf_token=None, form_action=None)
    assert f"*Approvals*\\n{said}" in slack and "Approved by *alice* (admin override)" in slack
    assert (
        said in teams
        and '"text": "alice", "weight": "Bolder"}, {"type": "TextRun", "text": " (admin override)"}'
        in teams
    )
    assert "1 of 2, decided by alice&#39;s admin override" in web
    assert "Approved by <strong>alice</strong> (admin override)" in web
    for card in (slack, teams, web):
        assert "2 of 2" not in card
    payload = {"status": "released", "votes": 2}
    fields = decision_fields(request, view, payload)
    assert (fields["actor"], fields["quorum"]) == ("alice (admin override)", "1 of 2 approvals")
    # Without the override, the same votes are the quorum met.
    plain = replace(request, details=base.details)
    assert build_view(plain, None, approval_url=None, run_url=None).quorum == "2 of 2 approvals"
    assert decision_fields(plain, build_view(plain, None, approval_url=None, run_url=None),
                           payload)["quorum"] == "2 of 2 approvals"  # fmt: skip


def test_chat_cards_say_an_admin_can_override_an_open_quorum() -> None:
    """A chat card cannot know who reads it: under an open quorum it says what an admin's
    approval does; not once decided, nor without a quorum or named approvers."""
    from cards.slack.render import render_slack_card
    from cards.teams.render import render_teams_card

    line = "An admin's approval overrides the quorum: it decides this request alone."
    for request, admins, shown in (
        (sample_request("pending"), True, True),
        (sample_request("pending"), False, False),  # app.yaml lists no admin
        (replace(sample_request("pending"), approvals_required=1), True, False),
        (replace(sample_request("pending"), approvers=()), True, False),
        (sample_request("released"), True, False),
    ):
        view = build_view(request, None, approval_url=None, run_url=None, admins=admins)
        assert view.override_possible is shown
        assert (line in json.dumps(render_slack_card(view), ensure_ascii=False)) is shown
        assert (line in json.dumps(render_teams_card(view), ensure_ascii=False)) is shown
