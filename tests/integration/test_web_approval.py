"""The approval page: signed per-approver links (single use, expiring with the request, for one
person), console sessions deciding from the plain ``approvalUrl``, CSRF, and what a used or
expired link shows. On SQLite and PostgreSQL, through a real server."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.domain.model import JournalEvent, Role, RunStatus, TakeoverStatus
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_status
from tests.support.web import (
    REFUND_DEMO,
    csrf_of,
    link_path,
    local,
    page,
    pending_request,
    sign_in,
    submit,
)

QUORUM = """
two-keys:
  nodes:
    - {id: approve, type: approval, reason: "Wire {{ input.amount }}", approvers: [finance],
       approvalsRequired: 2, channels: [web]}
    - {id: wire, type: connector, connector: demo-ledger, action: refund,
       args: {amount: "{{ input.amount }}"}}
bobs-and-carols:
  nodes:
    - {id: approve, type: approval, approvers: [bob, carol], approvalsRequired: 2,
       channels: [web]}
    - {id: note, type: connector, connector: demo-ledger, action: note, args: {text: done}}
"""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def api(migrated_db_url: str, clock: ManualClock) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, REFUND_DEMO + QUORUM, clock=clock) as api:
        yield api


async def _parked(api: Api, workflow: str = "refund-demo", **input: Any) -> Any:
    input = input or {"order": "A-1042"}  # the demo ledger's lookup finds 37.51 EUR for it
    run, _ = await api.engine.runs.start_run(workflow, input, AGENT)
    return await pending_request(api.engine, run.id)


# What the refund-demo request asks: its reason (the agent's text), arguments and approvers.
ASKS = ("Refund 37.51 EUR for A-1042", "A-1042", "37.51", "&#34;amount&#34;", "carol")


def assert_hidden(html: str) -> None:
    """The page says a request exists, and nothing of what it asks."""
    for text in ASKS:
        assert text not in html, text
    assert 'name="action"' not in html and "History of this request" not in html
    assert "<title>Approval request · Signoff</title>" in html


async def test_the_plain_approval_url_says_only_that_a_request_exists(api: Api) -> None:
    """Without a session or a link (a chat's link preview, a mail scanner): no summary, no
    arguments, no approvers, no reason; a sign-in that comes back to the page."""
    request = await _parked(api)
    status, body = await api.call("GET", f"/v1/runs/{request.run_id}/takeover", as_="bob")
    assert status == 200
    approval_url = body["requests"][0]["approvalUrl"]
    assert approval_url == f"http://signoff.test/approvals/{request.id}"

    status, html = await page(api.client, local(approval_url))

    assert status == 200
    assert_hidden(html)
    assert "An approval request is here. Sign in to see what it asks" in html
    sign_in = f"/console/login?next=%2Fapprovals%2F{request.id}"
    assert f'href="{sign_in}"' in html
    # Signing in there comes back to the page, which then shows the request.
    _, login = await page(api.client, sign_in)
    resp = await api.client.post(
        "/console/login",
        data={
            "token": api.tokens["bob"],
            "next": f"/approvals/{request.id}",
            "csrf_token": csrf_of(login),
        },
        allow_redirects=False,
    )
    assert resp.status == 303 and resp.headers["Location"] == f"/approvals/{request.id}"
    status, html = await page(api.client, f"/approvals/{request.id}")
    assert status == 200
    assert "Refund 37.51 EUR for A-1042" in html and "&#34;amount&#34;: 37.51," in html
    assert 'value="grant"' in html


async def test_a_session_of_someone_who_may_not_see_it_gets_no_arguments(api: Api) -> None:
    request = await _parked(api)  # approvers: finance = alice, bob, carol; dave is not one
    await sign_in(api.client, api.tokens["dave"])

    status, html = await page(api.client, f"/approvals/{request.id}")

    assert status == 403
    assert_hidden(html)
    assert "dave: you are not an approver for this request, so this page does not show" in html
    resp = await submit(api.client, f"/approvals/{request.id}", {"action": "grant"})
    assert resp.status == 403
    assert_hidden(await resp.text())
    assert (await api.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING


@pytest.mark.parametrize("who", ["bob", "admin"])
async def test_approvers_and_admins_see_the_arguments(api: Api, who: str) -> None:
    request = await _parked(api, "bobs-and-carols", amount="1")  # alice (admin) is not named
    await sign_in(api.client, api.tokens[who])

    status, html = await page(api.client, f"/approvals/{request.id}")

    assert status == 200
    assert "bob, carol" in html or ("bob" in html and "carol" in html)
    assert 'value="grant"' in html


async def test_the_runs_starter_sees_what_it_asks_but_cannot_decide(api: Api) -> None:
    run, _ = await api.engine.runs.start_run(
        "refund-demo", {"order": "A-1042"}, api.engine.principal_for_person("dave")
    )
    request = await pending_request(api.engine, run.id)
    await sign_in(api.client, api.tokens["dave"])  # dave is no approver of refund-demo

    status, html = await page(api.client, f"/approvals/{request.id}")

    assert status == 200
    assert "Refund 37.51 EUR for A-1042" in html and "&#34;amount&#34;: 37.51," in html
    assert "you started this run, so you cannot approve it" in html
    assert 'name="action"' not in html


async def test_the_live_timeline_needs_a_session(api: Api) -> None:
    """The only endpoint a page polls (the console's run timeline) answers nobody."""
    request = await _parked(api)
    resp = await api.client.get(f"/console/runs/{request.run_id}/events")
    assert resp.status == 401
    assert "A-1042" not in await resp.text()


async def test_a_signed_link_approves_once_and_then_shows_what_happened(api: Api) -> None:
    request = await _parked(api)
    link = link_path(api.client, request, "bob")

    status, html = await page(api.client, link)
    assert status == 200
    assert "Deciding as <strong>bob</strong>" in html
    assert 'value="grant"' in html and 'value="deny"' in html and 'value="takeover"' in html
    token = csrf_of(html)  # an old tab keeps its form

    resp = await submit(api.client, link, {"action": "grant", "reason": "checked the order"})
    assert resp.status == 303
    assert resp.headers["Location"] == link
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)
    ledger = await api.engine.store.ledger(run_id=request.run_id)
    assert [e["action"] for e in ledger] == ["lookup", "refund"]
    assert ledger[1]["args"] == {"order": "A-1042", "amount": 37.51, "currency": "EUR"}

    status, html = await page(api.client, link)
    assert status == 200
    assert "You approved through this link at" in html
    assert "Approved by <strong>bob</strong>" in html
    assert 'name="action"' not in html

    again = await api.client.post(
        link, data={"action": "grant", "csrf_token": token}, allow_redirects=False
    )
    assert again.status == 409
    text = await again.text()
    assert "this link has already been used" in text
    assert "Approved by <strong>bob</strong>" in text  # what happened, not an error page
    use = await api.engine.store.link_use(request.id, "bob")
    assert use is not None and use.action == "grant"


async def test_deny_through_a_link_records_the_reason(api: Api) -> None:
    request = await _parked(api)
    link = link_path(api.client, request, "carol")

    resp = await submit(api.client, link, {"action": "deny", "reason": "<b>duplicate</b> refund"})

    assert resp.status == 303
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)  # the onDeny path
    after = await api.engine.store.get_takeover(request.id)
    assert after.status == TakeoverStatus.DENIED and after.notes == "<b>duplicate</b> refund"
    status, html = await page(api.client, link)
    assert status == 200
    assert "Denied by <strong>carol</strong>" in html
    assert "&lt;b&gt;duplicate&lt;/b&gt; refund" in html


async def test_a_link_for_someone_who_may_not_decide_is_refused(api: Api) -> None:
    request = await _parked(api)  # approvers: finance = alice, bob, carol
    link = link_path(api.client, request, "dave")

    status, html = await page(api.client, link)
    assert status == 403
    assert "dave: you are not an approver for this request" in html
    assert_hidden(html)  # a signed link shows what it asks only to someone who may see it

    resp = await submit(api.client, link, {"action": "grant"}, csrf_from="/console/login")
    assert resp.status == 403
    assert (await api.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING
    assert await api.engine.store.link_use(request.id, "dave") is None


async def test_an_altered_link_is_not_valid(api: Api) -> None:
    request = await _parked(api)
    link = link_path(api.client, request, "bob")

    for altered in (link.replace("p=bob", "p=alice"), link.replace("exp=", "exp=1"), link[:-2]):
        status, html = await page(api.client, altered)
        assert status == 403, altered
        assert "this approval link is not valid" in html
        resp = await submit(api.client, altered, {"action": "grant"}, csrf_from="/console/login")
        assert resp.status == 403
    assert (await api.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING


async def test_a_form_without_its_csrf_token_is_refused(api: Api) -> None:
    request = await _parked(api)
    link = link_path(api.client, request, "bob")
    _, html = await page(api.client, link)
    token = csrf_of(html)

    missing = await api.client.post(link, data={"action": "grant"}, allow_redirects=False)
    wrong = await api.client.post(
        link, data={"action": "grant", "csrf_token": token[:-4] + "0000"}, allow_redirects=False
    )
    api.client.session.cookie_jar.clear()  # another browser: the token is not its own
    foreign = await api.client.post(
        link, data={"action": "grant", "csrf_token": token}, allow_redirects=False
    )

    for resp in (missing, wrong, foreign):
        assert resp.status == 403
        assert resp.content_type == "text/html"
        assert "security token" in await resp.text()
    assert (await api.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING


async def test_an_expired_request_answers_410_with_what_happened(
    api: Api, clock: ManualClock
) -> None:
    request = await _parked(api)
    link = link_path(api.client, request, "bob")
    _, html = await page(api.client, link)
    clock.advance(minutes=31)

    status, html_after = await page(api.client, link)
    assert status == 410
    assert "This request expired before anyone decided it." in html_after
    assert "Expired" in html_after and 'name="action"' not in html_after
    plain_status, _ = await page(api.client, f"/approvals/{request.id}")
    assert plain_status == 410

    resp = await api.client.post(
        link, data={"action": "grant", "csrf_token": csrf_of(html)}, allow_redirects=False
    )
    assert resp.status == 410
    assert "Expired" in await resp.text()


async def test_take_over_then_release_through_the_same_link(api: Api) -> None:
    request = await _parked(api)
    link = link_path(api.client, request, "bob")

    assert (await submit(api.client, link, {"action": "takeover"})).status == 303
    status, html = await page(api.client, link)
    assert status == 200
    assert "You took this over" in html and 'value="release"' in html
    assert (await api.engine.store.get_run(request.run_id)).status == RunStatus.WAITING

    _, html = await page(api.client, link)
    token = csrf_of(html)
    assert (await submit(api.client, link, {"action": "release"})).status == 303
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)
    again = await api.client.post(
        link, data={"action": "release", "csrf_token": token}, allow_redirects=False
    )
    assert again.status == 409
    use = await api.engine.store.link_use(request.id, "bob")
    assert use is not None and use.action == "release"


async def test_someone_elses_takeover_is_theirs_to_release(api: Api) -> None:
    request = await _parked(api)
    bob = link_path(api.client, request, "bob")
    assert (await submit(api.client, bob, {"action": "takeover"})).status == 303

    status, html = await page(api.client, link_path(api.client, request, "carol"))

    assert status == 200
    assert "Taken over by bob; the run waits until they, or an admin, release it." in html
    assert 'name="action"' not in html


async def test_quorum_progress_and_one_vote_per_link(api: Api) -> None:
    request = await _parked(api, "two-keys", amount="5000")
    bob, carol = link_path(api.client, request, "bob"), link_path(api.client, request, "carol")

    assert (await submit(api.client, bob, {"action": "grant"})).status == 303
    status, html = await page(api.client, bob)
    assert status == 200
    assert "1 of 2 approvals" in html and "You approved through this link" in html
    status, html = await page(api.client, carol)
    assert "1 of 2 approvals" in html and 'value="grant"' in html

    assert (await submit(api.client, carol, {"action": "grant"})).status == 303
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)


async def test_a_link_decides_as_every_decision_does(api: Api) -> None:
    """A link's decision is an ``Approvals`` decision: an admin who is not among the
    request's approvers overrides its quorum, journaled as the override it is, through a
    link as through the console."""
    request = await _parked(api, "bobs-and-carols", amount="1")
    alice = link_path(api.client, request, "alice")  # an admin, not one of its approvers

    assert (await submit(api.client, alice, {"action": "grant"})).status == 303
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)
    journal = await api.engine.store.journal(request.run_id)
    (granted,) = [e.data for e in journal if e.event == JournalEvent.TAKEOVER_GRANTED]
    assert granted["by"] == "alice" and granted["override"] == "admin"
    use = await api.engine.store.link_use(request.id, "alice")
    assert use is not None and use.action == "grant"


async def test_an_admin_sees_the_override_before_and_after_deciding(api: Api) -> None:
    """Issue 31: on a 2-of-2 quorum with one approval, an admin's override read "2 of 2
    approvals" with a full bar. Before clicking the admin is told it is an override; after,
    the page says 1 of 2, decided by the override, on the bar, the card and the history."""
    request = await _parked(api, "bobs-and-carols", amount="1")
    bob, alice = link_path(api.client, request, "bob"), link_path(api.client, request, "alice")
    assert (await submit(api.client, bob, {"action": "grant"})).status == 303

    _, html = await page(api.client, alice)
    assert "Approving now overrides the quorum (1 of 2): as an admin, you decide alone." in html
    _, html = await page(api.client, link_path(api.client, request, "carol"))
    assert "overrides the quorum" not in html  # an approver's vote is only a vote

    assert (await submit(api.client, alice, {"action": "grant"})).status == 303
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)
    await sign_in(api.client, api.tokens["admin"])  # alice's
    _, html = await page(api.client, f"/approvals/{request.id}")
    said = "1 of 2, decided by alice&#39;s admin override"
    assert f'<label for="quorum">{said}</label>' in html
    assert '<progress id="quorum" max="2" value="1">' in html
    assert "<dt>Approvals</dt><dd>" + said in html
    assert "Approved by <strong>alice</strong> (admin override)" in html
    assert "Granted: 1 of 2, decided by alice&#39;s admin override" in html  # the history
    assert "2 of 2" not in html


async def test_a_console_session_decides_from_the_plain_page(api: Api) -> None:
    request = await _parked(api)
    plain = f"/approvals/{request.id}"
    await sign_in(api.client, api.tokens["bob"])

    status, html = await page(api.client, plain)
    assert status == 200
    assert "Signed in as <strong>bob</strong>" in html and 'value="grant"' in html

    resp = await submit(api.client, plain, {"action": "grant"})
    assert resp.status == 303 and resp.headers["Location"] == plain
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)
    assert await api.engine.store.link_use(request.id, "bob") is None  # no link was used


async def test_without_identity_a_post_asks_to_sign_in(api: Api) -> None:
    request = await _parked(api)
    plain = f"/approvals/{request.id}"
    resp = await submit(api.client, plain, {"action": "grant"}, csrf_from="/console/login")
    assert resp.status == 401
    assert "sign in to decide" in await resp.text()


async def test_the_run_starter_cannot_approve_through_the_console(api: Api) -> None:
    await api.token("ops", Role.APPROVER, "alice")
    run, _ = await api.engine.runs.start_run(
        "refund-demo", {"order": "A-1", "amount": "1"}, api.engine.principal_for_person("alice")
    )
    request = await pending_request(api.engine, run.id)
    await sign_in(api.client, api.tokens["ops"])

    status, html = await page(api.client, f"/approvals/{request.id}")

    assert status == 200
    assert "you started this run, so you cannot approve it" in html
    assert 'name="action"' not in html


async def test_the_pages_draw_their_icons_with_no_emoji(api: Api) -> None:
    """Issue 31: without an emoji font, "⏳ Approval needed" showed an empty box."""
    emoji = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2300-\u23ff\u2b00-\u2bff\ufe0f]")
    request = await _parked(api)
    await sign_in(api.client, api.tokens["admin"])
    for path in (f"/approvals/{request.id}", f"/console/runs/{request.run_id}", "/console"):
        status, html = await page(api.client, path)
        assert status == 200 and emoji.findall(html) == [], path
    _, html = await page(api.client, f"/approvals/{request.id}")
    assert '<svg class="signoff-card__icon"' in html and "Approval needed</p>" in html
