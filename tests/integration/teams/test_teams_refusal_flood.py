"""Anyone who can reach ``/api/messages`` can make it refuse; the log stays bounded however many
they send (``bot.teams.refusals``): the first refusal of a kind in full, then one count a minute
on the engine's clock, and nothing the flood sends is acted on."""

from __future__ import annotations

import asyncio
import logging

import pytest
from teamsharness import FLOW, TENANT, running_teams
from test_teams_tenant import from_tenant

from tests.fakes.openid import new_key, openid_server, teams_config
from tests.support.engines import wait_for

OTHER = "0b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b"


def unsigned_for(tenant: str) -> str:
    return f"teams: {{insecureLocalDev: true, tenantId: '{tenant}'}}\n"


async def test_a_flood_of_unauthenticated_requests_logs_a_bounded_number_of_lines(
    migrated_db_url, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, logger="bot.teams")
    with openid_server(new_key()) as metadata_url:
        async with running_teams(migrated_db_url, FLOW, teams=teams_config(metadata_url)) as t:
            caplog.clear()
            for n in range(10):
                answers = await asyncio.gather(
                    *(t.post_raw(b"{}", Authorization=f"Bearer forged.{n}.{i}") for i in range(20))
                )
                assert {status for status, _ in answers} == {401}
            refused = [r.getMessage() for r in caplog.records if r.name == "bot.teams.channel"]
            assert len(refused) == 1 and "unauthenticated" in refused[0]

            # A minute later (the engine's clock) the flood is counted in one line.
            t.clock.advance(seconds=61)

            def counted() -> list[str]:
                return [m for m in caplog.messages if m.startswith("teams: refused 199 more")]

            (line,) = await wait_for(counted)
            assert "unauthenticated requests in the last 60 s" in line
            assert len([r for r in caplog.records if r.name == "bot.teams.channel"]) == 2


async def test_a_flood_from_another_tenant_logs_one_line_and_changes_nothing(
    migrated_db_url, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, logger="bot.teams")
    async with running_teams(migrated_db_url, FLOW, teams=unsigned_for(TENANT)) as t:
        caplog.clear()
        for _ in range(100):
            activity = from_tenant(
                t._base(conversation="19:x@thread.tacv2", kind="channel", user="alice"), OTHER
            )
            activity.update(type="conversationUpdate", membersAdded=[{"id": "28:bot"}])
            status, body = await t.post(activity)
            assert status == 403 and body["error"] == "wrong_tenant"
        refused = [r.getMessage() for r in caplog.records if r.name == "bot.teams.channel"]
        assert len(refused) == 1 and "another tenant" in refused[0]
        assert (
            await t.engine.store.conversation("teams", conversation_id="19:x@thread.tacv2") is None
        )
