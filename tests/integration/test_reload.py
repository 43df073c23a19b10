"""Reloading ``app.yaml`` while serving (``bot.reload``): ``people:``, ``groups:``, ``admins:``
and ``approvers:`` apply at once, all or nothing; a bad file changes nothing and says where;
other sections that changed are reported as needing a restart and keep running as they are.

The app is the real one (REST API, the Slack endpoint, workers) against ``FakeSlack``, clicked
with requests signed as Slack signs them (SIGHUP on a real ``signoff serve``: ``test_serve``).
"""

from __future__ import annotations

import gc
import types

from aiohttp import web

from bot.reload import Reloader
from bot.slack.actions import NOT_LINKED
from engine.domain.model import Role, RunStatus, TakeoverStatus
from tests.integration.slack.harness import USERS, SlackHarness, config_text, running_slack
from tests.integration.slack.test_slack_clicks import FLOWS
from tests.support.engines import wait_status

PEOPLE = """
people:
  alice: {email: alice@example.com, slack: U0ALICE01}
  bob: {email: bob@home.example.org}
  carol: {email: carol@example.com, slack: U0CAROL01}
groups:
  finance: [alice, bob, carol]
admins: [alice]
"""
# bob's Slack id, copied into app.yaml by hand (his email there is not his Slack one, so
# Signoff cannot find him by it)
LINKED = PEOPLE.replace(
    "bob: {email: bob@home.example.org}", "bob: {email: bob@home.example.org, slack: U0BOB0001}"
)


def text_of(h: SlackHarness, people: str = PEOPLE, workflows: str = FLOWS) -> str:
    return config_text(h.engine.config.database.url, h.slack, workflows, people=people)


async def pending(h: SlackHarness) -> tuple[str, str]:
    run_id = await h.start("refund", {"order": "B-1"})
    request = await h.request_of(run_id)
    await wait_status(h.engine, run_id, RunStatus.WAITING)
    return run_id, request.id


async def test_a_person_added_by_reload_decides_from_slack_at_once(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS, people=PEOPLE) as h:
        reloader = Reloader(h.engine, text_of(h), {})
        run_id, request_id = await pending(h)

        # bob is an approver, but Signoff does not know his Slack id yet.
        _, key = await h.click(USERS["bob"], "signoff_grant", request_id)
        assert await h.wait_told(key) == NOT_LINKED.format(user=USERS["bob"])
        assert (await h.engine.store.get_takeover(request_id)).status == TakeoverStatus.PENDING

        lines = await reloader.reload_text(text_of(h, LINKED))
        assert lines == ["reload of app.yaml: applied people"]

        _, key = await h.click(USERS["bob"], "signoff_grant", request_id)
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        request = await h.engine.store.get_takeover(request_id)
        assert request.status == TakeoverStatus.RELEASED and request.decided_by == "bob"

        # The same file again: nothing to apply.
        assert await reloader.reload_text(text_of(h, LINKED)) == [
            "reload of app.yaml: people, groups, admins and approvers unchanged"
        ]


async def test_an_invalid_file_changes_nothing_and_says_where(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS, people=PEOPLE) as h:
        reloader = Reloader(h.engine, text_of(h), {})
        before = h.engine.config
        broken = LINKED.replace("finance: [alice, bob, carol]", "finance: [alice, bob, carl]")
        lines = await reloader.reload_text(text_of(h, broken))
        assert lines[0] == "reload of app.yaml refused, nothing changed:"
        assert 'config error: groups.finance[2]: unknown person "carl"' in lines[1], lines
        assert h.engine.config is before  # bob's new Slack id was not applied either

        lines = await reloader.reload_text(text_of(h, LINKED) + "databse: {}\n")
        assert lines[0].endswith("refused, nothing changed:")
        assert lines[1].startswith("config error: databse: unknown key"), lines
        lines = await reloader.reload_text("people: [\n")
        assert "invalid YAML" in lines[1], lines
        assert h.engine.config is before

        _, request_id = await pending(h)
        _, key = await h.click(USERS["bob"], "signoff_grant", request_id)
        assert await h.wait_told(key) == NOT_LINKED.format(user=USERS["bob"])


async def test_sections_that_need_a_restart_are_reported_and_not_applied(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS, people=PEOPLE) as h:
        reloader = Reloader(h.engine, text_of(h), {})
        before = h.engine.config
        flows = FLOWS.replace('reason: "Refund', 'reason: "Give back')
        changed = text_of(h, LINKED + "approvers: [finance]\n", flows).replace(
            "workers: 8", "workers: 2"
        )
        lines = await reloader.reload_text(changed)
        assert lines == [
            "reload of app.yaml: applied people, approvers",
            "reload of app.yaml: server, workflows changed but need a restart; not applied",
        ]
        after = h.engine.config
        assert after.people["bob"].ids["slack"] == "U0BOB0001"
        assert after.approvers == ("finance",)
        assert after.server is before.server and after.server.workers == 8
        assert after.workflows is before.workflows
        assert after.database is before.database

        # Still different, still reported; the people already applied are not applied again.
        assert await reloader.reload_text(changed) == [
            "reload of app.yaml: people, groups, admins and approvers unchanged",
            "reload of app.yaml: server, workflows changed but need a restart; not applied",
        ]
        _, request_id = await pending(h)
        request = await h.engine.store.get_takeover(request_id)
        assert request.reason == "Refund B-1"  # the running workflow


async def test_people_that_do_not_fit_the_running_workflows_are_refused(
    migrated_db_url: str,
) -> None:
    named = FLOWS.replace("approvers: [finance]", "approvers: [bob]")
    async with running_slack(migrated_db_url, named, people=PEOPLE) as h:
        reloader = Reloader(h.engine, text_of(h, workflows=named), {})
        before = h.engine.config
        # bob leaves, and the new file's workflow no longer names him; but that workflow change
        # needs a restart, and the running one still names bob.
        gone = PEOPLE.replace("  bob: {email: bob@home.example.org}\n", "").replace(
            "[alice, bob, carol]", "[alice, carol]"
        )
        lines = await reloader.reload_text(text_of(h, gone, FLOWS))
        assert lines[0] == "reload of app.yaml refused, nothing changed:"
        assert lines[1].startswith(
            'config error: workflows.refund.nodes[0].approvers[0]: unknown person or group "bob"'
        ), lines
        assert lines[1].endswith("(the running workflows, which need a restart to change)")
        assert h.engine.config is before


async def test_admins_reloaded_act_on_the_next_request(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS, people=PEOPLE) as h:
        reloader = Reloader(h.engine, text_of(h), {})
        await h.api.token("carol-admin", Role.ADMIN, "carol")
        status, _ = await h.api.call("GET", "/v1/ledger", as_="carol-admin")
        assert status == 403  # carol is not in admins: (her token acts as an approver's)

        await reloader.reload_text(text_of(h, PEOPLE.replace("[alice]", "[alice, carol]")))
        status, _ = await h.api.call("GET", "/v1/ledger", as_="carol-admin")
        assert status == 200

        await reloader.reload_text(text_of(h))
        status, _ = await h.api.call("GET", "/v1/ledger", as_="carol-admin")
        assert status == 403


async def test_nothing_in_the_app_keeps_the_people_it_was_started_with(
    migrated_db_url: str,
) -> None:
    """Every object that held the configuration holds the reloaded one: none is left reading
    the old people (a new holder of ``engine.config`` must be handed reloads too)."""
    async with running_slack(migrated_db_url, FLOWS, people=PEOPLE) as h:
        reloader = Reloader(h.engine, text_of(h), {})
        started = h.engine.config
        await reloader.reload_text(text_of(h, LINKED))
        assert h.engine.config is not started
        gc.collect()
        holders = sorted(_holder(r) for r in gc.get_referrers(started))
        # Left: the app's state (``app[CONFIG]``, read for ``server.publicUrl`` only, which a
        # reload never changes); this test's own ``started`` is a coroutine's local.
        assert holders == ["app state"], holders


def _holder(found: object) -> str:
    """Who holds a reference: the object whose ``__dict__`` it is, a method's class, ..."""
    if isinstance(found, types.MethodType):
        return f"method {found.__func__.__qualname__}"
    if isinstance(found, dict):
        owners = [o for o in gc.get_referrers(found) if getattr(o, "__dict__", None) is found]
        if owners:
            return type(owners[0]).__name__
        app_keys = any(isinstance(k, web.AppKey) for k in found)
        return "app state" if app_keys else "dict"
    return type(found).__name__
