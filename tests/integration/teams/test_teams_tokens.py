"""Where the signing keys come from: the configured issuer's OpenID metadata only, fetched once
and kept, with a short timeout (PLATFORM.md, Teams).

The Bot Framework SDK, handed a token naming the Emulator's issuers, fetches another OpenID
document from the internet, with a blocking call and no timeout, and again on every request
while that fails. ``the_internet()`` stands for everything off this machine (a proxy that
records where each request was going and refuses it), so "nothing was fetched" is observed.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from teamsharness import FLOW, Teams, running_teams
from test_teams_auth import install_activity, stored

from bot.teams.adapter import NotAuthenticated, TeamsAdapter
from bot.teams.channel import METADATA_REFRESH_SECONDS
from engine.config.channels import TeamsConfig
from tests.fakes.openid import (
    APP_ID,
    EMULATOR_ISSUERS,
    ISSUER,
    METADATA_PATH,
    Issuer,
    new_key,
    openid_server,
    teams_config,
    the_internet,
    token,
)
from tests.support.waiting import settled, until


@pytest.fixture
def internet(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every request this process makes off loopback goes to ``the_internet()``; yields the
    destinations it was asked for."""
    with the_internet() as (url, wanted):
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
            monkeypatch.setenv(name, url)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.setenv(name, "127.0.0.1,localhost")
        yield wanted


@pytest.fixture
def signing_key():
    return new_key()


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
async def teams(sqlite_url, signing_key, issuer, internet):
    from engine.adapters.store.migrate import upgrade_to_head

    await upgrade_to_head(sqlite_url)
    with openid_server(signing_key, issuer) as metadata_url:
        async with running_teams(sqlite_url, FLOW, teams=teams_config(metadata_url)) as t:
            yield t


@pytest.mark.parametrize("emulator", EMULATOR_ISSUERS)
async def test_an_emulator_token_is_refused_without_fetching_anything(
    teams: Teams, signing_key, issuer: Issuer, internet: list[str], emulator: str
):
    # Signed with the issuer's own key and for this bot: only the issuer is not ours.
    bearer = token(signing_key, teams.connector.service_url, iss=emulator, ver="1.0", appid=APP_ID)
    for _ in range(3):
        status, body = await teams.post(install_activity(teams), Authorization=f"Bearer {bearer}")
        assert status == 401 and body["error"] == "unauthorized"
    assert internet == []  # before: CONNECT login.botframework.com:443, on every request
    # Nothing but the configured issuer's own start-up fetch.
    assert set(issuer.paths) <= {METADATA_PATH, "/keys"} and issuer.metadata_fetches <= 1
    assert not await stored(teams)


async def test_valid_tokens_are_checked_against_keys_fetched_once(
    teams: Teams, signing_key, issuer: Issuer, internet: list[str]
):
    url = teams.connector.service_url
    for _ in range(3):
        status, _ = await teams.post(
            install_activity(teams), Authorization=f"Bearer {token(signing_key, url)}"
        )
        assert status == 200
    answers = await asyncio.gather(
        *(
            teams.post(install_activity(teams), Authorization=f"Bearer {token(signing_key, url)}")
            for _ in range(10)
        )
    )
    assert [status for status, _ in answers] == [200] * 10
    # A key id the issuer does not publish is looked for again at most every few minutes.
    unknown = token(signing_key, url, kid="rotated-away")
    for _ in range(3):
        status, _ = await teams.post(install_activity(teams), Authorization=f"Bearer {unknown}")
        assert status == 401
    assert issuer.metadata_fetches == 1 and issuer.paths.count("/keys") == 1, issuer.paths
    assert not any("botframework" in where for where in internet), internet


async def test_an_issuer_that_is_down_is_not_asked_again_on_every_request(
    sqlite_url, signing_key, internet: list[str]
):
    from engine.adapters.store.migrate import upgrade_to_head

    await upgrade_to_head(sqlite_url)
    issuer = Issuer(down=True)
    with openid_server(signing_key, issuer) as metadata_url:
        async with running_teams(sqlite_url, FLOW, teams=teams_config(metadata_url)) as teams:
            bearer = token(signing_key, teams.connector.service_url)
            for _ in range(5):
                status, _ = await teams.post(
                    install_activity(teams), Authorization=f"Bearer {bearer}"
                )
                assert status == 401
    # Before: the start-up fetch, then one blocking fetch per request.
    assert issuer.metadata_fetches == 1, issuer.paths
    assert internet == []


async def test_a_key_fetch_that_hangs_gives_up_fast(signing_key):
    from bot.teams.tokens import FETCH_TIMEOUT

    assert FETCH_TIMEOUT <= 5
    # A server that accepts the connection and never answers.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        config = TeamsConfig(
            app_id=APP_ID,
            open_id_metadata_url=f"http://127.0.0.1:{port}/.well-known/openid-configuration",
            token_issuer=ISSUER,
        )
        adapter = TeamsAdapter(config, fetch_timeout=0.3)
        started = time.monotonic()
        with pytest.raises(NotAuthenticated):
            await adapter.authenticate(f"Bearer {token(signing_key, 'http://127.0.0.1:9/')}")
        assert time.monotonic() - started < 2.0


async def test_the_keys_are_kept_a_day_and_looked_up_again_sparingly(signing_key):
    from bot.teams.tokens import (
        FAILED_FETCH_PAUSE,
        KEYS_MAX_AGE,
        UNKNOWN_KEY_REFETCH,
        SigningKeys,
    )
    from tests.fakes.openid import KID

    now = [1000.0]
    issuer = Issuer()
    with openid_server(signing_key, issuer) as metadata_url:
        keys = SigningKeys(metadata_url, now=lambda: now[0])
        await asyncio.gather(*(keys.get(KID) for _ in range(5)))
        assert issuer.metadata_fetches == 1  # five at once share one fetch

        with pytest.raises(PermissionError):
            await keys.get("rotated-away")
        assert issuer.metadata_fetches == 1  # fetched a moment ago: not again
        now[0] += UNKNOWN_KEY_REFETCH
        with pytest.raises(PermissionError):
            await keys.get("rotated-away")
        assert issuer.metadata_fetches == 2  # a new key may have been published meanwhile

        now[0] += KEYS_MAX_AGE - 1
        await keys.get(KID)
        assert issuer.metadata_fetches == 2  # still within the day
        now[0] += 1
        issuer.down = True
        await keys.get(KID)  # a day old and the issuer is down: the keys held are used
        assert issuer.metadata_fetches == 3
        await keys.get(KID)
        assert issuer.metadata_fetches == 3  # not asked again at once
        now[0] += FAILED_FETCH_PAUSE
        issuer.down = False
        await keys.get(KID)
        assert issuer.metadata_fetches == 4


async def test_the_keys_are_fetched_again_after_the_refresh_interval(
    teams: Teams, issuer: Issuer, internet: list[str]
):
    """The background refresh sleeps on the engine's clock: moving it by the interval fetches
    the keys again, ahead of any request."""
    await until(lambda: issuer.metadata_fetches == 1, what="the start-up fetch")
    await until(lambda: METADATA_REFRESH_SECONDS in teams.clock.sleepers, what="asleep")
    teams.clock.advance(seconds=METADATA_REFRESH_SECONDS - 1)
    await settled()
    assert issuer.metadata_fetches == 1
    teams.clock.advance(seconds=1)
    await until(lambda: issuer.metadata_fetches == 2, what="the refresh")
    assert internet == []
