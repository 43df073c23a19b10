"""Installation: Teams sends conversationUpdate and installationUpdate together when the bot is
added; both store the same conversation reference, once, whatever the order."""

from __future__ import annotations

import asyncio

from teamsharness import BOT, CHANNEL, FLOW, running_teams


async def test_simultaneous_install_events_store_one_reference(migrated_db_url):
    async with running_teams(migrated_db_url, FLOW) as teams:
        for n in range(5):
            conversation = f"19:install{n}@thread.tacv2"
            update = teams._base(conversation=conversation, kind="channel", user="alice")
            update.update(type="conversationUpdate", membersAdded=[{"id": BOT["id"]}])
            install = teams._base(conversation=conversation, kind="channel", user="alice")
            install.update(type="installationUpdate", action="add")
            answers = await asyncio.gather(teams.post(update), teams.post(install))
            assert [status for status, _ in answers] == [200, 200]
            stored = await teams.engine.store.conversation("teams", conversation_id=conversation)
            assert stored is not None and stored.reference["conversation"]["id"] == conversation
        # Removing the bot is not an install.
        removal = teams._base(conversation=CHANNEL, kind="channel", user="alice")
        removal.update(type="installationUpdate", action="remove")
        assert (await teams.post(removal))[0] == 200
        assert await teams.engine.store.conversation("teams", conversation_id=CHANNEL) is None
