"""People found on Slack by email: a person with only ``email:`` is someone a click can come
from and a Home tab can be published to, through ``users.info`` / ``users.lookupByEmail``,
cached, and forgotten when Slack says the member's profile changed (``user_change``)."""

from __future__ import annotations

from engine.domain.model import JournalEvent, TakeoverStatus
from tests.integration.slack.harness import (
    CHANNEL,
    USERS,
    SlackHarness,
    running_slack,
    signed_headers,
)
from tests.integration.slack.test_slack_home import FLOWS, JSON, event_body, home_of, texts
from tests.support.engines import wait_for

PEOPLE = """
people:
  alice: {email: alice@example.com}
  bob: {email: bob@example.com, slack: U0BOB0001}
  carol: {email: carol@example.com}
  dave: {email: dave@example.com, slack: U0DAVE001}
groups:
  finance: [alice, bob, carol]
admins: [bob]
approvers: [finance]
"""
ALICE = USERS["alice"]
LINKING = "Ask a Signoff admin to add your Slack id"


async def pending(h: SlackHarness, order: str) -> tuple[str, str]:
    """A new request, once its card is in the channel: (request id, card ts)."""
    run_id = await h.start("refund", {"order": order, "note": ""})
    request = await h.request_of(run_id)

    async def card() -> str | None:
        cards = await h.engine.chat.messages(request_id=request.id, kind="card")
        return cards[0].message_ref if cards else None

    return request.id, await wait_for(card)


def calls(h: SlackHarness, method: str) -> int:
    return len(h.slack.calls_of(method))


async def test_a_person_with_only_an_email_is_found_and_kept(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS, people=PEOPLE) as h:
        # person -> Slack id: the new request's card republishes alice's Home tab, found by
        # her email; the next request's does not ask Slack again.
        first, ts = await pending(h, "B-1")
        await home_of(h, ALICE, lambda v: "1 request waits" in texts(v))
        assert calls(h, "users.lookupByEmail") >= 1
        looked_up = calls(h, "users.lookupByEmail")
        second, ts2 = await pending(h, "B-2")
        await home_of(h, ALICE, lambda v: "2 requests wait" in texts(v))
        assert calls(h, "users.lookupByEmail") == looked_up

        # Slack user -> person: her click on the card decides as alice.
        status, key = await h.click(ALICE, "signoff_grant", first, message_ts=ts)
        assert status == 200
        request = await h.engine.store.get_takeover(first)
        assert request.status == TakeoverStatus.RELEASED and request.decided_by == "alice"
        asked = calls(h, "users.info")
        assert asked == 0  # who U0ALICE01 is was kept from the lookup by her email

        # Whoever clicks too late is told who won, as a mention of her Slack id.
        status, key = await h.click(USERS["bob"], "signoff_grant", first, message_ts=ts)
        assert await h.wait_told(key) == f"Already approved by <@{ALICE}>; nothing changed."

        # Her email changes in Slack: the user_change event forgets what was kept, and the
        # member with the new address is nobody in people:.
        h.slack.users[ALICE]["profile"]["email"] = "alice@elsewhere.example"
        body = event_body({"type": "user_change", "user": h.slack.users[ALICE]}, "Ev0CHANGE1")
        status, _ = await h.send(body, {**signed_headers(body), **JSON})
        assert status == 200
        second_run = (await h.engine.store.get_takeover(second)).run_id
        size = len(await h.engine.store.journal(second_run))
        status, key = await h.click(ALICE, "signoff_grant", second, message_ts=ts2)
        assert status == 200
        assert LINKING in await h.wait_told(key)
        assert calls(h, "users.info") == asked + 1  # asked Slack again
        assert (await h.engine.store.get_takeover(second)).status == TakeoverStatus.PENDING
        assert len(await h.engine.store.journal(second_run)) == size


async def test_an_unknown_or_unconfirmed_clicker_is_told_how_to_get_linked(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS, people=PEOPLE) as h:
        h.slack.add_user("U0STRANGER", "stranger@example.com")
        h.slack.add_user(USERS["carol"], "carol@example.com", confirmed=False)
        request_id, ts = await pending(h, "B-1")
        run_id = (await h.engine.store.get_takeover(request_id)).run_id
        size = len(await h.engine.store.journal(run_id))
        for user in ("U0STRANGER", USERS["carol"]):
            for action in ("signoff_grant", "signoff_deny"):
                status, key = await h.click(user, action, request_id, message_ts=ts)
                assert status == 200
                told = await h.wait_told(key)
                assert told.startswith("Signoff doesn't know you on Slack; nothing changed."), told
                assert f"({user}) or email under people: in app.yaml" in told
        # Each member asked about once: the second click found the answer kept.
        asked = [c.args.get("user") for c in h.slack.calls_of("users.info")]
        assert sorted(asked) == sorted(["U0STRANGER", USERS["carol"]])
        request = await h.engine.store.get_takeover(request_id)
        assert request.status == TakeoverStatus.PENDING and request.votes == ()
        journal = await h.engine.store.journal(run_id)
        assert len(journal) == size
        assert JournalEvent.TAKEOVER_GRANTED not in [e.event for e in journal]
        assert h.slack.views == []  # no deny dialog either
        assert h.slack.posted(CHANNEL)  # the card is there, unchanged by these clicks
