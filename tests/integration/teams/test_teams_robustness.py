"""What the Teams endpoint does with activities it cannot use, and with replies it cannot send:
cases found by fuzzing ``/api/messages`` (tests/reliability/test_fuzz_teams.py), each of which
used to be an HTTP 500 with a traceback in the log.

A body that is no usable activity is a 400 before anything runs. A turn's reply goes through
the outbox, so the turn answers 200 whatever becomes of the reply: its command has run, and a
500 would only make Teams deliver it again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from teamsharness import BOT, CHANNEL, FLOW, Teams, running_teams

from tests.support.engines import wait_for


@pytest.fixture
async def teams(migrated_db_url):
    async with running_teams(migrated_db_url, FLOW) as t:
        yield t


def message(teams: Teams, text: str = "help", **fields: Any) -> dict[str, Any]:
    activity = teams._base(conversation=CHANNEL, kind="channel", user="alice")
    activity.update(type="message", text=text, **fields)
    return activity


@pytest.mark.parametrize(
    "fields",
    [
        {"conversation": "19:not-an-object"},  # the SDK cannot deserialize it
        {"timestamp": 5},
        {"from": ["alice"]},
        {"conversation": {"conversationType": "channel"}},  # no id: nowhere to answer
        {"conversation": None},
        {"serviceUrl": None},  # nowhere to answer, and no serviceurl claim to match
        {"serviceUrl": ""},
    ],
)
async def test_an_unusable_activity_is_a_400(teams: Teams, fields: dict[str, Any]):
    status, body = await teams.post(message(teams, **fields))
    assert status == 400, body
    assert set(body) == {"error", "message"}
    assert teams.connector.calls == []


@pytest.mark.parametrize("entities", [[None], [{}], [{"type": "mention"}]])
async def test_odd_entities_leave_the_message_readable(teams: Teams, entities: list[Any]):
    # The SDK's mention removal reads each entity as a well-formed mention.
    await teams.install()
    status, _ = await teams.post(message(teams, "<at>Signoff</at> help", entities=entities))
    assert status == 200
    (reply,) = await teams.connector.wait_for(lambda c: c.posts(CHANNEL))
    assert "gate status" in json.dumps(reply.card)  # the help text: the command was read


async def test_a_null_member_does_not_break_an_install(teams: Teams):
    activity = teams._base(conversation=CHANNEL, kind="channel", user="alice")
    activity.update(type="conversationUpdate", membersAdded=[None, {"id": BOT["id"]}])
    status, _ = await teams.post(activity)
    assert status == 200
    assert await teams.engine.store.conversation("teams", conversation_id=CHANNEL) is not None


async def test_a_reply_the_connector_refuses_fails_in_the_outbox_and_the_turn_succeeds(
    teams: Teams,
):
    await teams.install()
    teams.connector.fail_next(403)  # e.g. the bot was removed from the conversation meanwhile
    status, _ = await teams.post(message(teams, "<at>Signoff</at> subscribe ops"))
    assert status == 200
    # The command itself ran: the conversation is named.
    assert await teams.engine.store.conversation("teams", name="ops") is not None

    async def failed():
        rows = await teams.engine.store.outbox_messages(status="failed")
        return [(m.kind, error) for m, _, error in rows]

    ((kind, error),) = await wait_for(failed)
    assert kind == "reply" and "403" in (error or "")


async def test_an_incoming_id_the_connector_cannot_take_does_not_stop_the_reply(teams: Teams):
    # Replies used to go to .../activities/<incoming id>: a 10 kB id made a request line the
    # connector refused. A reply is a post into the conversation, whatever the id.
    await teams.install()
    status, _ = await teams.post(message(teams, id="x" * 10_000))
    assert status == 200
    (reply,) = await teams.connector.wait_for(lambda c: c.posts(CHANNEL))
    assert "gate status" in json.dumps(reply.card)
