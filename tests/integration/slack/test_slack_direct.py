"""Direct messages (``slack:@person``, ``slack:@group``, ``slack:dm``), and what the person who
decided is told when Slack refuses to update a card."""

from __future__ import annotations

import pytest

from bot.slack.refused import refusal_text
from engine.config import parse_config
from engine.domain.errors import ConfigError
from engine.domain.model import RunStatus, TakeoverStatus
from tests.fakes.slack import Message
from tests.integration.slack.harness import CHANNEL, USERS, SlackHarness, running_slack
from tests.support.engines import PEOPLE, wait_for, wait_status

FLOWS = f"""
direct:
  nodes:
    - {{id: approve, type: approval, approvers: [bob, carol], channels: ["slack:dm"]}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
group:
  nodes:
    - {{id: approve, type: approval, approvers: [dave], channels: ["slack:@finance"]}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
both:
  nodes:
    - {{id: approve, type: approval, approvers: [bob], channels: ["slack:{CHANNEL}", "slack:@bob"]}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
plain:
  nodes:
    - {{id: approve, type: approval, approvers: [bob], channels: ["slack:{CHANNEL}"]}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
"""
ERIN = """
erin:
  nodes:
    - {id: approve, type: approval, approvers: [bob], channels: ["slack:@erin", "slack:@bob"]}
"""


async def cards_in_dms(h: SlackHarness, *people: str) -> dict[str, Message]:
    """Each person's card, once every one of them has it in their DM."""

    async def there() -> dict[str, Message] | None:
        found = {p: [m for m in h.slack.dm(USERS[p]) if m.thread_ts is None] for p in people}
        return {p: m[0] for p, m in found.items()} if all(found.values()) else None

    cards: dict[str, Message] = await wait_for(there)
    return cards


async def test_each_approver_gets_the_card_in_their_dm_and_one_click_updates_every_copy(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await h.start("direct", {})
        request = await h.request_of(run_id)
        assert request.channels == ("slack:@bob", "slack:@carol")
        cards = await cards_in_dms(h, "bob", "carol")
        assert len(h.slack.calls_of("conversations.open", ok=True)) == 2
        assert {c.args["users"] for c in h.slack.calls_of("conversations.open")} == {
            USERS["bob"],
            USERS["carol"],
        }
        assert h.slack.posted(CHANNEL) == []  # only the DMs, one message per approver
        assert all(len([m for m in h.slack.dm(USERS[p])]) == 1 for p in ("bob", "carol"))

        # /signoff pending links each approver to their own copy.
        status, _, key = await h.command(USERS["bob"], "pending")
        assert status == 200
        dm = h.slack.ims[USERS["bob"]]
        assert f"/archives/{dm}/p{cards['bob'].ts.replace('.', '')}" in await h.wait_told(key)

        # Carol decides from her DM: bob's copy is updated too.
        status, _ = await h.click(
            USERS["carol"], "signoff_grant", request.id, message_ts=cards["carol"].ts
        )
        assert status == 200
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)

        async def updated() -> bool:
            return all(c.updates >= 1 for c in cards.values())

        await wait_for(updated)
        for card in cards.values():
            assert "Approved" in str(card.blocks) and "'action_id'" not in str(card.blocks)

        # The notices reply in each DM, under that DM's card.
        async def noticed() -> dict[str, list[Message]] | None:
            found = {
                p: [m for m in h.slack.dm(USERS[p]) if m.thread_ts == cards[p].ts]
                for p in ("bob", "carol")
            }
            return found if all(found.values()) else None

        notices = await wait_for(noticed)
        # The first reply under each copy is the decision (the step's result may follow).
        for replies in notices.values():
            assert str(replies[0].dedupe).startswith("notice:decision:"), replies[0].dedupe
        assert h.slack.duplicates() == {}

        # Bob's copy is stale for nobody: his late click is told who decided.
        status, late = await h.click(
            USERS["bob"], "signoff_grant", request.id, message_ts=cards["bob"].ts
        )
        assert f"Already approved by <@{USERS['carol']}>" in await h.wait_told(late)


async def test_a_group_address_sends_one_dm_per_member(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await h.start("group", {})
        request = await h.request_of(run_id)
        assert request.channels == ("slack:@alice", "slack:@bob", "slack:@carol")
        await cards_in_dms(h, "alice", "bob", "carol")
        assert h.slack.dm(USERS["dave"]) == []  # the approver is not in the group
        assert h.slack.duplicates() == {}


async def test_a_person_without_a_slack_id_fails_their_copy_only_and_says_why(
    migrated_db_url: str,
) -> None:
    people = PEOPLE.replace("people:\n", "people:\n  erin: {email: erin@example.com}\n")
    async with running_slack(migrated_db_url, ERIN, people=people) as h:
        run_id = await h.start("erin", {})
        await cards_in_dms(h, "bob")

        async def failed() -> list:
            rows = await h.engine.store.outbox_messages(run_id=run_id, status="failed")
            return [(m.channel, error) for m, _, error in rows]

        ((channel, error),) = await wait_for(failed)
        assert channel == "slack:@erin"
        assert "erin has no Slack user id" in (error or "")


def test_an_unknown_person_in_channels_is_a_config_error() -> None:
    text = PEOPLE + (
        "workflows:\n"
        "  wf:\n"
        "    nodes:\n"
        '      - {id: a, type: approval, channels: ["slack:@zed", "slack:@finance", "slack:dm"]}\n'
    )
    with pytest.raises(ConfigError) as refused:
        parse_config(text, {})
    (problem,) = refused.value.problems
    assert problem.startswith('workflows.wf.nodes[0].channels[0]: unknown person or group "zed"')
    config = parse_config(text.replace("slack:@zed", "slack:@dave"), {})
    assert config.expand_channels(["slack:@finance", "slack:dm", "web"], ["dave"]) == (
        "slack:@alice",
        "slack:@bob",
        "slack:@carol",
        "slack:@dave",
        "web",
    )


@pytest.mark.parametrize("code", ["cant_update_message", "message_not_found"])
async def test_a_refused_card_update_is_told_to_the_clicker_and_the_buttons_stay_harmless(
    migrated_db_url: str, code: str
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await h.start("plain", {})
        request = await h.request_of(run_id)

        async def card() -> Message | None:
            return next(iter(h.slack.posted(CHANNEL)), None)

        posted = await wait_for(card)
        h.slack.fail_next("chat.update", code)
        status, _ = await h.click(USERS["bob"], "signoff_grant", request.id, message_ts=posted.ts)
        assert status == 200
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)

        async def told() -> list:
            return h.slack.ephemerals

        ((channel, user, text),) = await wait_for(told)
        assert (channel, user) == (CHANNEL, USERS["bob"])
        decided = await h.request_of(run_id, TakeoverStatus.RELEASED)
        assert text == refusal_text(decided, code, "the card above")
        if code == "cant_update_message":
            assert text == (
                "Approved. I couldn't update the card above (Slack said the message can't be "
                "edited); the decision stands."
            )
        assert posted.updates == 0 and "'signoff_grant'" in str(posted.blocks)  # stale buttons
        # ... that decide nothing again.
        status, late = await h.click(
            USERS["bob"], "signoff_grant", request.id, message_ts=posted.ts
        )
        assert f"Already approved by <@{USERS['bob']}>" in await h.wait_told(late)
        rows = await h.engine.store.outbox_messages(run_id=run_id)
        assert next(r for r in rows if r[0].kind == "card_update")[1] == "sent"


async def test_a_refused_copy_elsewhere_is_told_in_the_deciders_own_dm(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await h.start("both", {})
        request = await h.request_of(run_id)
        (mine,) = (await cards_in_dms(h, "bob")).values()

        async def in_channel() -> Message | None:
            return next(iter(h.slack.posted(CHANNEL)), None)

        await wait_for(in_channel)
        h.slack.missing_channels.add(CHANNEL)  # the bot was removed from the channel
        status, _ = await h.click(USERS["bob"], "signoff_grant", request.id, message_ts=mine.ts)
        assert status == 200

        async def told() -> list:
            return h.slack.ephemerals

        ((channel, user, text),) = await wait_for(told)
        assert (channel, user) == (h.slack.ims[USERS["bob"]], USERS["bob"])
        assert text.startswith(f"Approved. I couldn't update the copy of the card in <#{CHANNEL}>")

        async def mine_updated() -> bool:  # bob's own copy, another outbox channel
            return mine.updates >= 1

        await wait_for(mine_updated)
