"""The Slack installation and OAuth state stores on Signoff's database (SQLite, and PostgreSQL
when configured): tokens sealed at rest and bound to their workspace, used states gone, people
mapped per workspace, and a token read beside a commit in progress."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest
import sqlalchemy as sa
from slack_sdk.oauth.installation_store import Installation

from bot.slack.installs import NotInstalled, SealedInstallationStore, Workspaces
from bot.slack.oauth import SweptStateStore
from bot.slack.sealed import TokenSeal, Unsealed
from engine.adapters.store.db import Database
from engine.adapters.store.migrate import upgrade_to_head
from engine.config import parse_config

KEY = "a-secret-key-of-at-least-32-characters!"
T1, T2 = "T0ACME001", "T0GLOBEX1"


def installation(team: str, token: str) -> Installation:
    return Installation(
        app_id="A0SIGNOFF",
        enterprise_id=None,
        team_id=team,
        team_name=f"{team} Inc",
        bot_token=token,
        bot_id=f"B{team}",
        bot_user_id=f"U{team}",
        bot_scopes="chat:write,commands",
        user_id="U0INSTALL",
        user_token=f"xoxp-{team}-user",
    )


def config(people: str, *, oauth: bool = True) -> object:
    slack = "clientId: '1.2', clientSecret: s" if oauth else "botToken: xoxb-1"
    return parse_config(
        f"server: {{secretKey: '{KEY}'}}\nslack: {{{slack}, signingSecret: sss}}\n{people}"
        "workflows: {w: {nodes: [{id: a, type: approval}]}}\n",
        {},
    )


async def test_tokens_are_sealed_in_the_rows_and_open_for_their_workspace(
    database: Database,
) -> None:
    store = SealedInstallationStore("1.2", database.writing_engine(), TokenSeal(KEY))
    await store.async_save(installation(T1, "xoxb-acme-token"))
    await store.async_save(installation(T2, "xoxb-globex-token"))

    assert await store.workspaces() == [T1, T2]
    bot = await store.async_find_bot(enterprise_id=None, team_id=T1)
    assert bot is not None and bot.bot_token == "xoxb-acme-token"
    found = await store.async_find_installation(enterprise_id=None, team_id=T2)
    assert found is not None
    assert (found.bot_token, found.user_token) == ("xoxb-globex-token", f"xoxp-{T2}-user")
    async with database.engine.connect() as conn:
        rows = (await conn.execute(sa.text("SELECT * FROM slack_installations"))).mappings()
        values = repr([dict(r) for r in rows])
    assert "xoxb-" not in values and "xoxp-" not in values
    assert values.count("sealed1:") == 4


async def test_a_token_is_read_while_another_connection_holds_the_write_lock(
    sqlite_url: str,
) -> None:
    """Every Web API call in OAuth mode reads its workspace's token: on SQLite that read must
    not queue for the write lock behind a commit (it waited up to busy_timeout, 10 s, when the
    store's reads began IMMEDIATE)."""
    await upgrade_to_head(sqlite_url)
    database = Database(sqlite_url)
    try:
        store = SealedInstallationStore(
            "1.2", database.writing_engine(), TokenSeal(KEY), reader=database.engine
        )
        await store.async_save(installation(T1, "xoxb-acme-token"))
        path = sqlite_url.partition(":///")[2]
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # a writer mid-commit, for as long as the reads take
        try:
            began = time.monotonic()
            async with asyncio.timeout(5):
                bot = await store.bot_of_team(T1)
                teams = await store.workspaces()
            took = time.monotonic() - began
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert bot is not None and bot.bot_token == "xoxb-acme-token" and teams == [T1]
        assert took < 5  # the busy wait is 10 s: a read that queued would not be here
    finally:
        await database.dispose()


async def test_a_sealed_token_moved_clear_or_under_another_key_does_not_open(
    database: Database,
) -> None:
    store = SealedInstallationStore("1.2", database.writing_engine(), TokenSeal(KEY))
    await store.async_save(installation(T1, "xoxb-acme-token"))
    await store.async_save(installation(T2, "xoxb-globex-token"))
    workspaces = Workspaces(lambda: config(""), store)  # type: ignore[arg-type]

    async with database.engine.begin() as conn:  # T1's sealed token put on T2's row
        (sealed,) = (
            await conn.execute(sa.text(f"SELECT bot_token FROM slack_bots WHERE team_id='{T1}'"))
        ).one()
        await conn.execute(
            sa.text("UPDATE slack_bots SET bot_token = :t WHERE team_id = :team"),
            {"t": sealed, "team": T2},
        )
    with pytest.raises(Unsealed):
        await store.bot_of_team(T2)
    with pytest.raises(NotInstalled, match=f"the bot token of Slack workspace {T2} does not"):
        await workspaces.token_for(T2)

    async with database.engine.begin() as conn:  # a token written in clear is not used
        await conn.execute(
            sa.text(f"UPDATE slack_bots SET bot_token='xoxb-x' WHERE team_id='{T2}'")
        )
    with pytest.raises(Unsealed, match="is not sealed"):
        await store.bot_of_team(T2)

    other = SealedInstallationStore("1.2", database.writing_engine(), TokenSeal("another key"))
    with pytest.raises(Unsealed, match="does not open"):
        await other.bot_of_team(T1)
    assert await workspaces.token_for(T1) == "xoxb-acme-token"


async def test_uninstall_deletes_and_revocation_clears_the_bot_token(database: Database) -> None:
    store = SealedInstallationStore("1.2", database.writing_engine(), TokenSeal(KEY))
    await store.async_save(installation(T1, "xoxb-acme-token"))
    await store.async_save(installation(T2, "xoxb-globex-token"))

    await store.async_delete_all(enterprise_id=None, team_id=T1)
    await store.async_delete_bot(enterprise_id=None, team_id=T2)

    assert await store.workspaces() == []
    assert await store.async_find_installation(enterprise_id=None, team_id=T1) is None
    kept = await store.async_find_installation(enterprise_id=None, team_id=T2)
    assert kept is not None and kept.bot_token is None
    workspaces = Workspaces(lambda: config(""), store)  # type: ignore[arg-type]
    with pytest.raises(NotInstalled, match=f"not installed in Slack workspace {T2}"):
        await workspaces.token_for(T2)
    with pytest.raises(NotInstalled, match="not installed in any Slack workspace yet"):
        await workspaces.token_for(None)


async def test_a_state_is_good_once_and_expired_ones_are_swept(database: Database) -> None:
    stale = SweptStateStore(expiration_seconds=-1, engine=database.writing_engine())
    for _ in range(3):
        await stale.async_issue()
    store = SweptStateStore(expiration_seconds=600, engine=database.writing_engine())
    state = await store.async_issue()

    async with database.engine.connect() as conn:
        rows = (await conn.execute(sa.text("SELECT state FROM slack_oauth_states"))).all()
    assert [r[0] for r in rows] == [state]
    assert await store.async_consume(state) is True
    assert await store.async_consume(state) is False
    assert await store.async_consume("never-issued") is False


PEOPLE = f"""
people:
  alice: {{slack: {T1}/U0SAME001}}
  bob: {{slack: {T2}/U0SAME001}}
  carol: {{slack: U0CAROL01}}
"""


@pytest.mark.parametrize(
    ("installed", "team", "user", "person"),
    [
        ([T1, T2], T1, "U0SAME001", "alice"),
        ([T1, T2], T2, "U0SAME001", "bob"),
        ([T1, T2], T1, "U0CAROL01", None),  # a plain id names nobody beside two workspaces
        ([T1], T1, "U0CAROL01", "carol"),  # ... and the only one's user when one is installed
        ([T1], T2, "U0CAROL01", None),  # not of another workspace
        ([T1], "T0OTHER01", "U0SAME001", None),
        ([T1], None, "U0CAROL01", None),
    ],
)
async def test_people_are_mapped_per_workspace(
    database: Database, installed: list[str], team: str | None, user: str, person: str | None
) -> None:
    store = SealedInstallationStore("1.2", database.writing_engine(), TokenSeal(KEY))
    for each in installed:
        await store.async_save(installation(each, f"xoxb-{each}"))
    found = await Workspaces(lambda: config(PEOPLE), store).person(team, user)  # type: ignore[arg-type]
    assert (found.name if found else None) == person


async def test_with_a_bot_token_the_plain_forms_are_its_workspace() -> None:
    workspaces = Workspaces(lambda: config(PEOPLE, oauth=False))  # type: ignore[arg-type]
    assert (await workspaces.person(T1, "U0CAROL01")).name == "carol"  # type: ignore[union-attr]
    assert (await workspaces.person(T2, "U0SAME001")).name == "bob"  # type: ignore[union-attr]
    assert await workspaces.person("T0OTHER01", "U0SAME001") is None
    assert await workspaces.token_for(T1) == "xoxb-1"
