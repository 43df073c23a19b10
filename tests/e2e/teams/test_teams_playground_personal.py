"""The personal chat in the Microsoft 365 Agents Playground (``bot.teams.personal``): the bot,
added in the playground's personal chat, greets Alex and keeps the chat as Alex's; a card
addressed ``teams:@alex`` arrives there; "pending" lists it again as a card Alex can click; the
click decides once and both copies are updated. Driven through the playground's own HTTP and
WebSocket interface, as ``test_teams_playground`` explains (same harness, same network guard).
"""

from __future__ import annotations

from typing import Any

from test_teams_playground import (
    ALEX,
    Playground,
    _card_of,
    _texts,
    click_by_api,
    signoff_and_playground,
)

from engine.domain.model import Principal, Role, RunStatus
from tests.support.engines import wait_for, wait_status


async def say(pg: Playground, text: str) -> None:
    conversation, user = pg.config["personalChat"]["id"], pg.config["currentUser"]
    status, body = await pg.post(
        f"/_conversation/v1/conversations/{conversation}/messages",
        {"from": {"id": user["id"]}, "text": text, "textFormat": "plain"},
    )
    assert status in (200, 201), body


def created_with(text: str) -> Any:
    def found(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            e for e in events if e.get("action") == "createMessage" and text in _texts(_card_of(e))
        ]

    return found


async def test_pending_in_the_personal_chat_lists_cards_that_decide(tmp_path):
    async with signoff_and_playground(tmp_path) as (pg, engine):
        conversation = pg.config["personalChat"]["id"]
        assert pg.config["currentUser"]["aadObjectId"] == ALEX

        # Installed in the personal chat: stored as Alex's, and one greeting.
        status, _ = await pg.post(f"/_debug/conversation/{conversation}/installation", {})
        assert status in (200, 201, 204)
        await pg.wait_for(created_with("Write pending"))
        chat = await wait_for(lambda: engine.store.personal_chat("teams", ALEX))
        assert chat.conversation_id == conversation

        # A request addressed teams:@alex comes into that chat by itself.
        agent = Principal(name="token:agent", role=Role.AGENT, token="agent")
        run, _ = await engine.runs.start_run("direct", {"payee": "ACME", "amount": 99}, agent)
        await wait_status(engine, run.id, RunStatus.WAITING)
        (request,) = await engine.store.list_takeovers(run_id=run.id)
        (pushed,) = await pg.wait_for(created_with("Pay 99 to ACME"))

        # "pending" lists it again: a line, then the card.
        await say(pg, "pending")
        await pg.wait_for(created_with("1 approval request waits for your decision"))
        listed = await pg.wait_for(lambda events: created_with("Pay 99 to ACME")(events)[1:])
        card = _card_of(listed[0])
        assert card is not None and '"amount": 99' in _texts(card)
        message_id = listed[0]["message"]["messageId"]

        # Alex clicks Approve on the listed card, as the playground's web client sends it.
        await click_by_api(pg, card, message_id)

        await wait_status(engine, run.id, RunStatus.COMPLETED)
        ledger = await engine.store.ledger(run_id=run.id)
        assert [(r["action"], r["args"]) for r in ledger] == [
            ("refund", {"order": "ACME", "amount": 99})
        ]
        decided = await engine.store.get_takeover(request.id)
        assert decided.decided_by == "alex"

        # Both copies in the chat are updated: the one pushed and the one listed.
        pushed_id = pushed["message"]["messageId"]

        def updated(events: list[dict[str, Any]]) -> set[str]:
            return {
                e["message"]["messageId"]
                for e in events
                if e.get("action") == "updateMessage" and "Approved by alex" in _texts(_card_of(e))
            }

        assert await pg.wait_for(lambda events: {pushed_id, message_id} <= updated(events))
