"""Slack installed like a distributed app: OAuth installs in two workspaces, each answered with
its own bot token, uninstalls that remove them, the state checked, tokens sealed at rest.

Real app, real database (SQLite, and PostgreSQL when configured), ``FakeSlack`` with its strict
``oauth.v2.access``; requests signed as Slack signs them.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

import pytest
import sqlalchemy as sa
from aiohttp.test_utils import TestClient, TestServer

from bot.app import create_app
from bot.keys import ENGINE
from bot.slack.sink import SlackSink
from engine.adapters.store.db import Database
from engine.assembly import EngineOptions
from engine.config import parse_config
from engine.config.channels.sections import SlackConfig, slack_state, slack_warnings
from engine.domain.errors import ConfigError
from engine.domain.model import Role, TakeoverStatus
from tests.fakes.slack import FakeSlack
from tests.integration.slack.harness import (
    SECRET,
    TEAM,
    config_text,
    running_slack,
    signed_headers,
)
from tests.integration.slack.oauth_harness import (
    CLIENT_ID,
    SECRET_KEY,
    OAuthHarness,
    oauth_config,
    running_oauth,
)
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import wait_for
from tests.support.process import ROOT

T1, T2 = "T0ACME001", "T0GLOBEX1"
C1, C2 = "C0ACMEOPS", "C0GLOBEXA"
SAME_USER = "U0SAMEID1"  # one user id, in both workspaces: two different people
PEOPLE = f"""
people:
  alice: {{slack: {T1}/{SAME_USER}}}
  bob: {{slack: {T2}/{SAME_USER}}}
  carol: {{slack: U0CAROL01}}
  dave: {{slack: {T1}/U0DAVE001}}
"""
FLOWS = f"""
acme:
  nodes:
    - {{id: approve, type: approval, approvers: [alice, carol], channels: ["slack:{T1}/{C1}"]}}
globex:
  nodes:
    - {{id: approve, type: approval, approvers: [bob, carol], channels: ["slack:{T2}/{C2}"]}}
both:
  nodes:
    - {{id: approve, type: approval, approvers: [alice, bob, dave],
       channels: ["slack:{T1}/{C1}", "slack:{T2}/{C2}"]}}
plain:
  nodes:
    - {{id: approve, type: approval, approvers: [carol], channels: ["slack:{C1}"]}}
"""


async def start(h: OAuthHarness, workflow: str) -> str:
    status, run = await h.api.call(
        "POST", "/v1/runs", as_="agent", json={"workflow": workflow, "input": {}}
    )
    assert status == 201, run
    return str(run["id"])


async def pending(h: OAuthHarness, run_id: str) -> Any:
    async def check() -> Any:
        found = await h.engine.store.list_takeovers(run_id=run_id)
        return found[-1] if found else None

    return await wait_for(check)


def token_of(slack: FakeSlack, team: str) -> str:
    (token,) = [t for t, owner in slack.tokens.items() if owner == team]
    return token


async def installed(h: OAuthHarness, *teams: str) -> None:
    for team in teams:
        h.slack.add_channel(team, {T1: C1, T2: C2}[team])
        status, page = await h.install(team, name=f"{team} Inc")
        assert status == 200, page
        assert f"installed in the Slack workspace <b>{team} Inc</b> ({team})" in page


async def test_two_workspaces_each_answered_with_its_own_token(migrated_db_url: str) -> None:
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS) as h:
        await installed(h, T1, T2)
        acme, globex = await start(h, "acme"), await start(h, "globex")
        acme_request, globex_request = await pending(h, acme), await pending(h, globex)

        async def both_posted() -> bool:
            return bool(h.slack.posted(C1) and h.slack.posted(C2))

        await wait_for(both_posted)
        (acme_post,) = [c for c in h.slack.calls_of("chat.postMessage") if c.args["channel"] == C1]
        (globex_post,) = [
            c for c in h.slack.calls_of("chat.postMessage") if c.args["channel"] == C2
        ]
        assert acme_post.token == token_of(h.slack, T1)
        assert globex_post.token == token_of(h.slack, T2)

        # The same user id clicks in each workspace: alice in T1, bob in T2.
        status, _ = await h.click(
            T1, SAME_USER, "signoff_grant", acme_request.id, channel=C1, key="a"
        )
        assert status == 200
        status, _ = await h.click(
            T2, SAME_USER, "signoff_grant", globex_request.id, channel=C2, key="b"
        )
        assert status == 200
        assert (await h.engine.store.get_takeover(acme_request.id)).decided_by == "alice"
        assert (await h.engine.store.get_takeover(globex_request.id)).decided_by == "bob"

        async def updated() -> list[Any] | None:
            calls = h.slack.calls_of("chat.update", ok=True)
            return calls if {c.args["channel"] for c in calls} == {C1, C2} else None

        updates = await wait_for(updated)
        assert {(c.args["channel"], c.token) for c in updates} == {
            (C1, token_of(h.slack, T1)),
            (C2, token_of(h.slack, T2)),
        }
        assert h.slack.refused == []


async def test_the_deny_dialog_opens_with_the_clickers_workspace_token(
    migrated_db_url: str,
) -> None:
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS) as h:
        await installed(h, T1, T2)
        request = await pending(h, await start(h, "globex"))
        await h.click(T2, SAME_USER, "signoff_deny", request.id, channel=C2, key="d")

        opened = await wait_for(lambda: _async(h.slack.calls_of("views.open", ok=True)))
        assert [c.token for c in opened] == [token_of(h.slack, T2)]
        assert h.slack.views[0]["private_metadata"] == request.id


async def test_a_person_is_mentioned_only_in_their_own_workspace(migrated_db_url: str) -> None:
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS) as h:
        await installed(h, T1, T2)
        request = await pending(h, await start(h, "both"))
        await h.click(T1, SAME_USER, "signoff_grant", request.id, channel=C1, key="m")
        assert (await h.engine.store.get_takeover(request.id)).decided_by == "alice"

        # Too late, in each workspace: alice is @-mentioned in hers only (U0SAMEID1 is bob in T2).
        await h.click(T1, "U0DAVE001", "signoff_grant", request.id, channel=C1, key="t1")
        await h.click(T2, SAME_USER, "signoff_grant", request.id, channel=C2, key="t2")
        told = await wait_for(lambda: _async(h.told("t1") and h.told("t2")))
        assert told and h.told("t1") == [f"Already approved by <@{SAME_USER}>; nothing changed."]
        assert h.told("t2") == ["Already approved by alice; nothing changed."]
        sink = h.engine.dispatcher.sinks["slack"]
        assert isinstance(sink, SlackSink)
        messages = sink.messages  # notices (reminders, escalations) mention so too
        assert messages.mentions(["alice", "bob", "carol"], T1) == [SAME_USER, "bob", "U0CAROL01"]
        assert messages.mentions(["alice", "bob"], None) == [SAME_USER, SAME_USER]


async def test_a_user_of_one_workspace_is_never_the_person_of_another(migrated_db_url: str) -> None:
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS) as h:
        await installed(h, T1, T2)
        request = await pending(h, await start(h, "acme"))

        # U0SAMEID1 of T2 is bob, who may not decide acme's request: alice's id is T1's.
        await h.click(T2, SAME_USER, "signoff_grant", request.id, channel=C2, key="x")
        told = await wait_for(lambda: _async(h.told("x")))
        assert "not an approver" in told[0] or "not allowed" in told[0] or "bob" in told[0]
        # carol is mapped without a workspace: with two installed, that names nobody.
        await h.click(T1, "U0CAROL01", "signoff_grant", request.id, channel=C1, key="y")
        told = await wait_for(lambda: _async(h.told("y")))
        assert "doesn't know you on Slack" in told[0]
        assert (await h.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING


async def test_with_one_workspace_installed_the_plain_forms_name_it(migrated_db_url: str) -> None:
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS) as h:
        await installed(h, T1)
        request = await pending(h, await start(h, "plain"))  # slack:C0ACMEOPS, no workspace
        card = await wait_for(lambda: _async(h.slack.posted(C1)))
        assert card[0].team == T1

        await h.click(T1, "U0CAROL01", "signoff_grant", request.id, channel=C1, key="c")
        assert (await h.engine.store.get_takeover(request.id)).decided_by == "carol"

        # A second workspace makes the plain forms ambiguous: the card is refused, in words.
        await installed(h, T2)
        run = await start(h, "plain")

        async def failed() -> str | None:
            rows = await h.engine.queries.outbox_messages(run_id=run)
            return next((error for _, st, error in rows if st == "failed" and error), None)

        error = await wait_for(failed)
        assert f"2 Slack workspaces are installed ({T1}, {T2})" in error
        assert f"slack:{T1}/C0123ABCD" in error


async def test_uninstall_and_revoked_tokens_remove_the_installation(migrated_db_url: str) -> None:
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS) as h:
        await installed(h, T1, T2)
        status, _ = await h.event(T1, {"type": "app_uninstalled"}, "Ev0UNINST1")
        assert status == 200
        bot = f"U0{T2[1:]}"
        status, _ = await h.event(T2, {"type": "tokens_revoked", "tokens": {"bot": [bot]}}, "Ev2")
        assert status == 200
        h.slack.uninstall(T1)
        h.slack.uninstall(T2)

        rows = await _rows(migrated_db_url)
        assert [r["team_id"] for r in rows["slack_bots"]] == []
        assert [(r["team_id"], r["bot_token"]) for r in rows["slack_installations"]] == [(T2, None)]

        # Later requests from T1 decide nothing and say why; cards for it are not posted.
        request = await pending(h, await start(h, "acme"))
        status, _ = await h.click(T1, SAME_USER, "signoff_grant", request.id, channel=C1, key="u")
        assert status == 200
        told = await wait_for(lambda: _async(h.told("u")))
        assert "not installed in this Slack workspace" in told[0]
        assert (await h.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING

        async def refused() -> str | None:
            rows = await h.engine.queries.outbox_messages(run_id=request.run_id)
            return next((error for _, st, error in rows if st == "failed" and error), None)

        assert "not installed in Slack workspace" in await wait_for(refused)
        assert h.slack.calls_of("chat.postMessage") == []


async def test_a_token_is_stored_sealed_never_in_clear(migrated_db_url: str) -> None:
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS) as h:
        await installed(h, T1)
        token = token_of(h.slack, T1)
    rows = await _rows(migrated_db_url)
    (bot,) = rows["slack_bots"]
    (installation,) = rows["slack_installations"]
    assert bot["bot_token"].startswith("sealed1:")
    assert installation["bot_token"].startswith("sealed1:")
    everything = repr(rows)
    assert token not in everything
    assert token.split("-", 1)[1] not in everything


async def test_a_replayed_or_foreign_state_is_refused(migrated_db_url: str) -> None:
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS) as h:
        first = await h.start_install()
        assert first.status == 200
        assert "Secure" in first.cookie and "HttpOnly" in first.cookie
        assert first.redirect_uri == "http://signoff.test/slack/oauth_redirect"
        assert "chat:write" in first.scopes
        code = h.slack.approve(CLIENT_ID, T1, redirect_uri=first.redirect_uri)
        assert (await h.redirect(first.state, code=code, state=first.state))[0] == 200
        exchanges = len(h.slack.calls_of("oauth.v2.access"))

        # The same redirect again (a reload, or someone replaying it): used state.
        code = h.slack.approve(CLIENT_ID, T2, redirect_uri=first.redirect_uri)
        status, page = await h.redirect(first.state, code=code, state=first.state)
        assert status == 401
        assert "already been used or has expired, so nothing was installed" in page

        # A state this browser was not given (another browser's), or no cookie at all.
        mine, theirs = await h.start_install(), await h.start_install()
        status, page = await h.redirect(mine.state, code=code, state=theirs.state)
        assert status == 400
        assert "not started in this browser" in page
        assert (await h.redirect(None, code=code, state=mine.state))[0] == 400
        # A made-up state with a matching cookie: not one Signoff issued.
        assert (await h.redirect("forged", code=code, state="forged"))[0] == 401

        assert len(h.slack.calls_of("oauth.v2.access")) == exchanges  # no code was exchanged
        assert set(h.slack.tokens.values()) == {h.slack.team, T1}
        # The states still unused work once.
        status, _ = await h.redirect(theirs.state, code=code, state=theirs.state)
        assert status == 200


async def test_a_code_is_exchanged_once_and_only_with_the_apps_secret(
    migrated_db_url: str,
) -> None:
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS) as h:
        started = await h.start_install()
        code = h.slack.approve(CLIENT_ID, T1, redirect_uri=started.redirect_uri)
        assert (await h.redirect(started.state, code=code, state=started.state))[0] == 200
        again = await h.start_install()
        status, page = await h.redirect(again.state, code=code, state=again.state)
        assert status == 401
        assert "Slack did not accept the installation" in page
        assert h.slack.refused[-1][:2] == ("oauth.v2.access", "invalid_code")

    async with running_oauth(
        migrated_db_url, PEOPLE, FLOWS, client_secret="rotated", tokens=False
    ) as h:
        started = await h.start_install()
        code = h.slack.approve(CLIENT_ID, T2, redirect_uri=started.redirect_uri)
        status, page = await h.redirect(started.state, code=code, state=started.state)
        assert status == 401
        assert "check slack.clientId and slack.clientSecret" in page
        assert h.slack.refused[-1][:2] == ("oauth.v2.access", "bad_client_secret")
        assert T2 not in h.slack.tokens.values()
        assert [r["team_id"] for r in (await _rows(migrated_db_url))["slack_bots"]] == [T1]


async def test_only_the_workspaces_of_slack_workspaces_may_install(migrated_db_url: str) -> None:
    only_t1 = f", workspaces: [{T1}]"
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS, slack_extra=only_t1) as h:
        await installed(h, T1)
        status, page = await h.install(T2)
        assert status == 403
        assert "not one Signoff may be installed in (slack.workspaces), so nothing was" in page
    assert [r["team_id"] for r in (await _rows(migrated_db_url))["slack_bots"]] == [T1]


async def test_with_a_bot_token_slack_workspaces_refuses_the_others(migrated_db_url: str) -> None:
    async with FakeSlack() as slack:
        text = config_text(migrated_db_url, slack, FLOWS, people=PEOPLE).replace(
            f"apiBaseUrl: '{slack.api_url}'", f"apiBaseUrl: '{slack.api_url}', workspaces: [{T1}]"
        )
        app = create_app(parse_config(text, {}), EngineOptions(clock=ManualClock()))
        async with TestClient(TestServer(app)) as client:
            h = OAuthHarness(Api(client, app[ENGINE], {}), slack)
            await h.api.token("agent", Role.AGENT)
            request = await pending(h, await start(h, "acme"))
            await h.click(T2, SAME_USER, "signoff_grant", request.id, channel=C1, key="o")
            told = await wait_for(lambda: _async(h.told("o")))
            assert "not installed in this Slack workspace" in told[0]
            assert (await h.engine.store.get_takeover(request.id)).status == "pending"
            await h.click(T1, SAME_USER, "signoff_grant", request.id, channel=C1, key="i")
            assert (await h.engine.store.get_takeover(request.id)).decided_by == "alice"


async def test_cancelled_install_says_nothing_was_installed(migrated_db_url: str) -> None:
    async with running_oauth(migrated_db_url, PEOPLE, FLOWS) as h:
        started = await h.start_install()
        status, page = await h.redirect(started.state, error="access_denied", state=started.state)
        assert status == 200
        assert "cancelled in Slack, so nothing was installed" in page


@pytest.mark.parametrize(
    ("server", "slack", "problem"),
    [
        (
            "",
            f"clientId: '{CLIENT_ID}', clientSecret: x",
            "server.secretKey: required when Slack is installed through OAuth (slack.clientId)",
        ),
        (
            "secretKey: 'k'",
            f"clientId: '{CLIENT_ID}', botToken: xoxb-1",
            "slack.clientId: set together with slack.botToken",
        ),
        ("secretKey: 'k'", f"clientId: '{CLIENT_ID}'", "slack.clientSecret: required"),
        (
            "secretKey: 'k'",
            f"clientId: '{CLIENT_ID}', clientSecret: x, workspaces: [acme]",
            "slack.workspaces[0]: not a Slack workspace id like T0123ABCD",
        ),
    ],
)
def test_oauth_mode_refuses_to_start_without_what_it_needs(
    server: str, slack: str, problem: str
) -> None:
    text = (
        f"server: {{{server}}}\n"
        f"slack: {{{slack}, signingSecret: '{SECRET}'}}\n"
        "workflows: {w: {nodes: [{id: a, type: approval}]}}\n"
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text, {})
    assert any(line.startswith(problem) for line in caught.value.problems), caught.value


def test_a_workspace_form_of_people_and_channels_is_valid() -> None:
    text = oauth_config("sqlite+aiosqlite:///x.db", FakeSlack(), PEOPLE, FLOWS)
    config = parse_config(text, {})
    assert config.slack.oauth and config.slack.enabled
    assert config.people["alice"].ids["slack"] == f"{T1}/{SAME_USER}"
    bad = text.replace(f"{T1}/{SAME_USER}", f"{T1}/x")
    with pytest.raises(ConfigError, match=r"people.alice.slack: must be a Slack user id"):
        parse_config(bad, {})


async def _async(value: Any) -> Any:
    return value


async def _rows(db_url: str) -> dict[str, list[dict[str, Any]]]:
    db = Database(db_url)
    try:
        async with db.engine.connect() as conn:
            out: dict[str, list[dict[str, Any]]] = {}
            for table in ("slack_bots", "slack_installations", "slack_oauth_states"):
                result = await conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY id"))
                out[table] = [dict(row) for row in result.mappings()]
            return out
    finally:
        await db.dispose()


def test_the_guides_oauth_configuration_loads_as_written() -> None:
    """docs/slack.md's "Install for a company" blocks, together, with the variables they name
    set: OAuth mode, with the workspace forms of channels and people."""
    guide = (ROOT / "docs" / "slack.md").read_text()
    section = guide.split("## Install for a company (OAuth)", 1)[1].split("\n## ", 1)[0]
    snippets = [textwrap.dedent(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.S)]
    assert len(snippets) == 2
    env = {
        "SIGNOFF_SECRET_KEY": SECRET_KEY,
        "SLACK_CLIENT_ID": CLIENT_ID,
        "SLACK_CLIENT_SECRET": "s3cret",
        "SLACK_SIGNING_SECRET": SECRET,
    }
    config = parse_config("".join(snippets), env)
    assert config.slack.oauth and config.slack.enabled
    assert config.people["erin"].ids["slack"] == "T0123ABCD/U0ERIN0001"
    (node,) = config.workflows["vendor-payment"].nodes
    assert node.channels == ("slack:T0123ABCD/C0123456789",)
    with pytest.raises(ConfigError, match=r"server\.secretKey: required"):
        parse_config(snippets[0], {**env, "SIGNOFF_SECRET_KEY": ""})


async def test_with_a_bot_token_an_uninstall_is_answered_and_logged(
    migrated_db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_slack(migrated_db_url, "w: {nodes: [{id: a, type: approval}]}") as h:
        body = json.dumps(
            {
                "team_id": TEAM,
                "api_app_id": "A0SIGNOFF",
                "event": {"type": "app_uninstalled"},
                "type": "event_callback",
                "event_id": "Ev0GONE",
                "event_time": 1,
            }
        )
        headers = {**signed_headers(body), "Content-Type": "application/json"}
        status, _ = await h.send(body, headers)
    assert status == 200
    assert "slack.botToken no longer works" in caplog.text


def test_signoff_check_tells_the_oauth_mode() -> None:
    """What ``signoff check`` prints for Slack (``slack_state``), by mode."""
    oauth = SlackConfig(signing_secret=SECRET, client_id=CLIENT_ID, client_secret="s")
    assert slack_state(oauth) == "set (OAuth: workspaces install at /slack/install)"
    short = SlackConfig(signing_secret="short", client_id=CLIENT_ID, client_secret="s")
    assert slack_state(short) == "invalid: signingSecret is too short"
    assert slack_state(SlackConfig("xoxb-1", SECRET)) == "set"
    assert slack_warnings(SlackConfig(client_id=CLIENT_ID, client_secret="s")) == [
        "slack: clientId/clientSecret need signingSecret too; Slack is disabled"
    ]
