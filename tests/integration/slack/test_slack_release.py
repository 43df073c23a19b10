"""Who may release a run taken over: the person who took it over, or an admin (journaled as
such); the card says so, and every refusal names the verb that was clicked.

The rule lives in ``engine.services.approvals`` only, so Slack, Teams, the web page and the API
agree.
"""

from __future__ import annotations

from engine.domain.model import JournalEvent, Role, RunStatus, TakeoverStatus
from tests.integration.slack.harness import USERS, running_slack
from tests.integration.slack.test_slack_clicks import FLOWS, pending_request, unchanged
from tests.integration.slack.test_slack_flows import card_of, text_of, until
from tests.support.engines import wait_status


async def test_only_the_taker_or_an_admin_may_release(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await wait_status(h.engine, run_id, RunStatus.WAITING)
        card = await card_of(h, request_id)
        status, _ = await h.click(USERS["carol"], "signoff_takeover", request_id)
        assert status == 200
        await until(lambda: card.updates >= 1)
        assert "The run waits until they, or an admin, release it." in text_of(card)

        # bob approves for finance too, but the run waits for carol's work: not his to release.
        status, key = await h.click(USERS["bob"], "signoff_release", request_id)
        assert status == 200
        told = await h.wait_told(key)
        assert told == (
            "Carol took this run over, so only they or an admin can release it; nothing changed."
        ), told
        await h.api.token("bob", Role.APPROVER, "bob")
        code, body = await h.api.call(
            "POST", f"/v1/runs/{run_id}/takeover/{request_id}/release", as_="bob"
        )
        assert code == 403 and "only they or an admin can release it" in str(body), body
        assert (await h.engine.store.get_takeover(request_id)).status == TakeoverStatus.GRANTED

        # alice is an admin: she may, and the journal says she did so as an admin.
        status, key = await h.click(USERS["alice"], "signoff_release", request_id)
        assert status == 200
        released = await h.engine.store.get_takeover(request_id)
        assert (released.status, released.released_by) == (TakeoverStatus.RELEASED, "alice")
        journal = await h.engine.store.journal(run_id)
        (entry,) = [e for e in journal if e.event == JournalEvent.TAKEOVER_RELEASED]
        assert entry.data == {"requestId": request_id, "by": "alice", "asAdmin": True}


async def test_the_taker_releases_and_is_not_recorded_as_admin(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await wait_status(h.engine, run_id, RunStatus.WAITING)
        await h.click(USERS["alice"], "signoff_takeover", request_id)
        await h.click(USERS["alice"], "signoff_release", request_id)
        journal = await h.engine.store.journal(run_id)
        (entry,) = [e for e in journal if e.event == JournalEvent.TAKEOVER_RELEASED]
        assert entry.data == {"requestId": request_id, "by": "alice"}


async def test_refusals_name_the_verb_that_was_clicked(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        status, run = await h.api.call(
            "POST", "/v1/runs", as_="admin", json={"workflow": "refund", "input": {"order": "S"}}
        )
        assert status == 201
        request = await h.request_of(run["id"])
        await wait_status(h.engine, run["id"], RunStatus.WAITING)
        size = len(await h.engine.store.journal(run["id"]))
        expected = {
            "signoff_grant": "approve it",
            "signoff_takeover": "take it over",
            "signoff_deny": "deny it",
        }
        for action, doing in expected.items():
            status, key = await h.click(USERS["alice"], action, request.id)
            assert status == 200
            told = await h.wait_told(key)
            assert told == f"You started this run, so you cannot {doing}; nothing changed.", told
        await unchanged(h, run["id"], request.id, size)
