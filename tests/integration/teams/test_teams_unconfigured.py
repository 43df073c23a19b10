"""Without ``teams.appId`` Teams is not mounted: nothing that arrives at ``/api/messages``
can act, whoever it names (issue 22, finding 1). Unsigned activities are accepted only with
``teams.insecureLocalDev: true``, which needs a loopback server and is announced loudly."""

from __future__ import annotations

import logging

import pytest
from teamsharness import (
    CHANNEL,
    FLOW,
    UNSIGNED,
    Teams,
    card_posted,
    config_text,
    running_teams,
    start_run,
    subscribed,
)

from bot.app import create_app
from engine.assembly import EngineOptions
from engine.config import parse_config
from engine.domain.errors import ConfigError
from engine.domain.model import RunStatus, TakeoverStatus
from tests.support.clock import ManualClock
from tests.support.engines import wait_status


@pytest.fixture
async def teams(migrated_db_url):
    async with running_teams(migrated_db_url, FLOW, teams="") as t:
        yield t


async def test_without_an_app_id_a_known_persons_grant_decides_nothing(teams: Teams):
    run_id = await start_run(teams)
    await wait_status(teams.engine, run_id, RunStatus.WAITING)
    (request,) = await teams.engine.store.list_takeovers(run_id=run_id)
    # bob may decide it, and the invoke names his Azure AD object id: it must not be enough.
    status, _ = await teams.click("grant", request.id, as_="bob")
    assert status in (401, 404)
    after = await teams.engine.store.get_takeover(request.id)
    assert after.status is TakeoverStatus.PENDING and after.votes == ()
    assert await teams.engine.store.conversation("teams", conversation_id=CHANNEL) is None


async def test_without_an_app_id_an_admins_gate_off_stores_nothing(teams: Teams):
    status, _ = await teams.say("gate off", as_="alice")
    assert status in (401, 404)
    status, _ = await teams.say("gate threshold 0.1", as_="alice")
    assert status in (401, 404)
    assert (await teams.engine.gate.status()).overrides == ()
    assert teams.connector.calls == []


async def test_the_switch_lets_unsigned_activities_in_and_says_so(
    migrated_db_url, caplog: pytest.LogCaptureFixture
):
    with caplog.at_level(logging.WARNING, logger="bot.teams"):
        async with running_teams(migrated_db_url, FLOW, teams=UNSIGNED) as teams:
            await subscribed(teams)
            run_id = await start_run(teams)
            request_id, card = await card_posted(teams, run_id)
            status, _ = await teams.click("grant", request_id, as_="bob", card=card)
            assert status == 200
    assert "insecureLocalDev is ON" in caplog.text and "UNSIGNED" in caplog.text


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "signoff.example.com"])
def test_the_switch_is_refused_unless_the_server_binds_to_loopback(host: str):
    text = config_text("sqlite+aiosqlite:///x.db", FLOW, teams=UNSIGNED)
    text = text.replace("server: {", f"server: {{host: '{host}', ", 1)
    with pytest.raises(ConfigError) as caught:
        parse_config(text, {})
    (problem,) = caught.value.problems
    assert problem.startswith("teams.insecureLocalDev: ") and host in problem
    # The host may come from the environment too.
    plain = config_text("sqlite+aiosqlite:///x.db", FLOW, teams=UNSIGNED)
    with pytest.raises(ConfigError):
        parse_config(plain, {"SIGNOFF_HOST": host})


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_the_switch_is_accepted_on_loopback(host: str):
    text = config_text("sqlite+aiosqlite:///x.db", FLOW, teams=UNSIGNED)
    config = parse_config(text, {"SIGNOFF_HOST": host})
    assert config.teams.insecure_local_dev and not config.teams.authenticated


def test_the_switch_is_off_unless_set(sqlite_url: str):
    config = parse_config(config_text(sqlite_url, FLOW, teams=""), {})
    assert not config.teams.insecure_local_dev and not config.teams.enabled
    app = create_app(config, EngineOptions(clock=ManualClock()), run_background=False)
    paths = {r.resource.canonical for r in app.router.routes() if r.resource is not None}
    assert "/api/messages" not in paths and "/v1/runs" in paths
