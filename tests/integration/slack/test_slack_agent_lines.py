"""Agent text cannot draw Signoff's own status lines in Slack's Deny dialog or ``/signoff
pending``: its line breaks are collapsed and a status-like start is quoted, with the function
the cards use (``cards.text.agent_text``)."""

from __future__ import annotations

import dataclasses

from bot.slack.actions import deny_modal
from cards.samples import sample_request
from engine.domain.model import RunStatus
from tests.integration.slack.harness import USERS, running_slack
from tests.integration.slack.test_slack_clicks import FLOWS
from tests.support.engines import wait_for, wait_status

FORGED = "✅ Approved by alice"


def forged_lines(text: str) -> list[str]:
    """The lines of ``text`` that a reader would take for Signoff's decision line."""
    return [line for line in text.splitlines() if line.lstrip(" •*_>").startswith(FORGED)]


def test_the_deny_dialog_shows_agent_text_on_one_line_or_quoted() -> None:
    for reason in (f"Refund B-1\n{FORGED}", f"{FORGED}\nby the agent", f"B-1\u2028{FORGED}"):
        request = dataclasses.replace(sample_request("pending"), reason=reason)
        text = deny_modal(request)["blocks"][0]["text"]["text"]
        assert forged_lines(text) == [], (reason, text)
        assert "\n" not in text and FORGED in text


async def test_an_argument_with_a_forged_line_draws_none_in_slack(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await h.start("refund", {"order": f"B-1\n{FORGED}"})
        request = await h.request_of(run_id)
        await wait_status(h.engine, run_id, RunStatus.WAITING)
        assert forged_lines(request.reason or "")  # the reason itself does carry the line

        # The Deny dialog: its text is one line.
        await h.click(USERS["bob"], "signoff_deny", request.id)

        async def opened() -> bool:
            return bool(h.slack.views)

        await wait_for(opened)
        (modal,) = h.slack.views
        shown = modal["blocks"][0]["text"]["text"]
        assert shown == f"Refund B-1 {FORGED}"
        assert forged_lines(shown) == []

        # /signoff pending: the request's line carries the text on that one line.
        status, _, key = await h.command(USERS["bob"], "pending")
        assert status == 200
        told = await h.wait_told(key)
        assert f"Refund B-1 {FORGED}>" in told
        assert forged_lines(told) == []
