"""The deny dialog against a fake as strict as Slack's ``views.open``.

Slack refuses a whole view when one limit is broken (a ``plain_text_input`` ``max_length`` over
3000 was enough), and a ``trigger_id`` is good for 3 s and once. Whatever Slack refuses after a
click, the clicker is told, ephemerally, and nothing changes.
"""

from __future__ import annotations

import copy
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.actions import deny_modal
from cards.samples import sample_request
from engine.domain.model import RunStatus, TakeoverStatus
from tests.fakes.slack import FakeSlack, view_problems
from tests.integration.slack.harness import USERS, running_slack
from tests.integration.slack.test_slack_clicks import FLOWS, pending_request
from tests.support.engines import wait_for, wait_status


def _modal() -> dict[str, Any]:
    return deny_modal(sample_request("pending"))


def test_the_deny_modal_fits_slacks_view_limits() -> None:
    assert view_problems(_modal()) == []


def test_the_fake_refuses_every_view_limit_slack_refuses() -> None:
    def broken(change: Any) -> list[str]:
        view = copy.deepcopy(_modal())
        change(view)
        return view_problems(view)

    def element(view: dict[str, Any]) -> dict[str, Any]:
        return dict(view["blocks"][1]["element"])

    cases = {
        "/view/title/text": lambda v: v["title"].update(text="x" * 25),
        "/view/submit/text": lambda v: v["submit"].update(text="x" * 25),
        "/view/close/text": lambda v: v["close"].update(text="x" * 25),
        "/view/blocks/1/label/text": lambda v: v["blocks"][1]["label"].update(text="x" * 2001),
        "/view/blocks/1/element/max_length": lambda v: v["blocks"][1]["element"].update(
            max_length=3001
        ),
        "/view/blocks/1/element/min_length": lambda v: v["blocks"][1]["element"].update(
            min_length=3001
        ),
        "/view/blocks/1/element/placeholder/text": lambda v: v["blocks"][1]["element"].update(
            placeholder={"type": "plain_text", "text": "x" * 151}
        ),
        "/view/private_metadata": lambda v: v.update(private_metadata="x" * 3001),
        "/view/callback_id": lambda v: v.update(callback_id="x" * 256),
        "/view/blocks": lambda v: v.update(blocks=v["blocks"] * 51),
    }
    assert element(_modal())["max_length"] <= 3000
    for pointer, change in cases.items():
        problems = broken(change)
        assert problems and all(p.startswith("[ERROR] ") for p in problems), pointer
        assert any(f"[json-pointer:{pointer}]" in p for p in problems), (pointer, problems)


async def test_the_fake_answers_views_open_as_slack_does() -> None:
    async with FakeSlack() as slack:
        client = AsyncWebClient(token=slack.token, base_url=slack.api_url, retry_handlers=[])
        bad = {**_modal(), "title": {"type": "plain_text", "text": "x" * 25}}
        trigger = slack.trigger()
        try:
            await client.views_open(trigger_id=trigger, view=bad)
            raise AssertionError("a 25-character title was accepted")
        except SlackApiError as exc:
            assert exc.response.status_code == 200
            assert exc.response["error"] == "invalid_arguments"
            (message,) = exc.response["response_metadata"]["messages"]
            assert message.endswith("[json-pointer:/view/title/text]")

        errors = []
        for trigger_id, advance in ((trigger, 0.0), (trigger, 0.0), ("12.34.ab", 0.0)):
            slack.advance(advance)
            try:
                await client.views_open(trigger_id=trigger_id, view=_modal())
                errors.append("ok")
            except SlackApiError as exc:
                errors.append(exc.response["error"])
        late = slack.trigger()
        slack.advance(3.1)
        try:
            await client.views_open(trigger_id=late, view=_modal())
        except SlackApiError as exc:
            errors.append(exc.response["error"])
        # A refused view leaves its trigger unused; a used one cannot open a second view.
        assert errors == ["ok", "exchanged_trigger_id", "invalid_trigger_id", "expired_trigger_id"]
        assert len(slack.views) == 1


async def test_a_deny_dialog_slack_did_not_open_is_told_to_the_clicker(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await wait_status(h.engine, run_id, RunStatus.WAITING)

        # The click reaches Signoff after its trigger_id expired (a slow network, a slow ack).
        body, key = h.action_body(USERS["bob"], "signoff_deny", request_id)
        h.slack.advance(4.0)
        status, _ = await h.send_signed(body)
        assert status == 200
        told = await h.wait_told(key)
        assert told.startswith(
            "Slack didn't open the Deny dialog (the click reached it too late). "
            "Nothing was decided — try Deny again"
        ), told
        assert "http://signoff.test/approvals/" + request_id in told
        assert h.slack.views == []
        assert (await h.engine.store.get_takeover(request_id)).status == TakeoverStatus.PENDING

        # A view Slack refuses is told as well, with Slack's error.
        h.slack.fail_next("views.open", "invalid_arguments")
        status, key = await h.click(USERS["bob"], "signoff_deny", request_id)
        told = await h.wait_told(key)
        assert told.startswith(
            "Slack didn't open the Deny dialog (it refused it: invalid_arguments)."
        ), told

        # In time, the dialog opens; the fake accepts it (max_length 3000, not 4000).
        status, key = await h.click(USERS["bob"], "signoff_deny", request_id)

        async def opened() -> bool:
            return bool(h.slack.views)

        await wait_for(opened)
        (modal,) = h.slack.views
        assert modal["blocks"][1]["element"]["max_length"] == 3000
        assert h.told(key) == []


async def test_a_server_error_from_views_open_is_told_and_the_request_stays_decidable(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await wait_status(h.engine, run_id, RunStatus.WAITING)

        # An outage in front of Slack answers 5xx with a body that is not Slack's JSON.
        h.slack.answer_next("views.open", 503, "upstream connect error", "text/plain")
        h.slack.answer_next("views.open", 502, "<html><h1>502 Bad Gateway</h1></html>", "text/html")
        h.slack.answer_next("views.open", 500, '{"ok": false, "err', "application/json")
        for _ in range(3):
            status, key = await h.click(USERS["bob"], "signoff_deny", request_id)
            assert status == 200
            told = await h.wait_told(key)
            assert told.startswith(
                "Slack didn't open the Deny dialog (it answered with a server error). "
                "Nothing was decided"
            ), told
            assert "try Deny again" in told
        assert [c.status for c in h.slack.calls_of("views.open")] == [503, 502, 500]
        assert h.slack.views == []
        assert (await h.engine.store.get_takeover(request_id)).status == TakeoverStatus.PENDING

        # Slack is back: Deny opens the dialog, and its submission denies.
        status, key = await h.click(USERS["bob"], "signoff_deny", request_id)

        async def opened() -> bool:
            return bool(h.slack.views)

        await wait_for(opened)
        status, answer = await h.submit_deny(USERS["bob"], request_id, "not this one")
        assert status == 200, answer
        request = await h.engine.store.get_takeover(request_id)
        assert request.status == TakeoverStatus.DENIED and request.decided_by == "bob"
