"""The console's away page: a signed-in person sets and ends their own absence with a form
(CSRF like every console form; bad input is a page saying why, and changes nothing); an admin
sees everyone away and ends anyone's; nobody else ends another's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.web import REFUND_DEMO, page, sign_in, submit

PAGE = "/console/away"


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, REFUND_DEMO, clock=ManualClock()) as api:
        yield api


async def _absences(api: Api) -> list[tuple[str, str, str]]:
    found = await api.engine.store.absences(api.engine.clock.now())
    return [(a.person, a.delegate, a.set_by) for a in found]


async def _switch(api: Api, token: str) -> None:
    """Sign out, and in again with ``token``."""
    assert (await submit(api.client, "/console/logout", {}, csrf_from=PAGE)).status == 303
    await sign_in(api.client, api.tokens[token])


async def test_a_person_sets_and_ends_their_own_absence_on_the_console(api: Api) -> None:
    await sign_in(api.client, api.tokens["bob"])
    status, html = await page(api.client, "/console/away")
    assert status == 200 and "You're not away" in html
    assert "Everyone away" not in html  # admins only
    assert 'value="bob"' not in html  # not one's own delegate

    resp = await submit(api.client, "/console/away", {"until": "2026-01-08", "delegate": "carol"})
    assert (resp.status, resp.headers["Location"]) == (303, "/console/away")
    assert await _absences(api) == [("bob", "carol", "bob")]
    _, html = await page(api.client, "/console/away")
    assert "You're away until" in html and "2026-01-08 00:00 UTC" in html
    assert "<strong>carol</strong> decides for you" in html

    resp = await submit(api.client, "/console/away/end", {"person": "bob"}, csrf_from=PAGE)
    assert resp.status == 303
    assert await _absences(api) == []


@pytest.mark.parametrize(
    ("fields", "status", "said"),
    [
        ({"until": "2025-12-01", "delegate": "carol"}, 422, "must end in the future"),
        ({"until": "soon", "delegate": "carol"}, 422, "is no date"),
        ({"until": "2026-01-08", "delegate": "mallory"}, 422, "mallory is not in people:"),
        ({"until": "2026-01-08", "delegate": "bob"}, 422, "someone else"),
        ({"until": "2026-01-08"}, 400, "delegate is missing"),
        ({"until": "2026-01-08", "delegate": "c" * 201}, 400, "longer than 200"),
    ],
)
async def test_bad_input_is_a_page_saying_why_and_changes_nothing(
    api: Api, fields: dict[str, str], status: int, said: str
) -> None:
    await sign_in(api.client, api.tokens["bob"])
    resp = await submit(api.client, "/console/away", fields)
    assert resp.status == status
    assert said in await resp.text()
    assert await _absences(api) == []


async def test_forms_need_their_csrf_token(api: Api) -> None:
    await sign_in(api.client, api.tokens["bob"])
    fields = {"until": "2026-01-08", "delegate": "carol"}
    resp = await api.client.post("/console/away", data=fields, allow_redirects=False)
    assert resp.status == 403
    assert await _absences(api) == []


async def test_an_admin_sees_everyone_away_and_ends_anyones_others_may_not(api: Api) -> None:
    await sign_in(api.client, api.tokens["carol"])
    await submit(api.client, "/console/away", {"until": "2026-01-03", "delegate": "dave"})
    await _switch(api, "bob")
    await submit(api.client, "/console/away", {"until": "2026-01-08", "delegate": "carol"})
    refused = await submit(api.client, "/console/away/end", {"person": "carol"}, csrf_from=PAGE)
    assert refused.status == 403
    assert "only carol or an admin" in await refused.text()

    await _switch(api, "admin")
    _, html = await page(api.client, "/console/away")
    assert "Everyone away" in html
    assert html.count('name="person" value="bob"') == 1
    assert html.count('name="person" value="carol"') == 1
    assert 'aria-label="End carol\'s absence"' in html  # each End button says whose
    resp = await submit(api.client, "/console/away/end", {"person": "carol"}, csrf_from=PAGE)
    assert resp.status == 303
    assert await _absences(api) == [("bob", "carol", "bob")]
    audit = [a for a in await api.engine.store.audit_log() if a["action"] == "away.end"]
    assert [(a["actor"], a["target"]) for a in audit] == [("alice", "away.carol")]


async def test_strangers_are_sent_to_sign_in(api: Api) -> None:
    resp = await api.client.get("/console/away", allow_redirects=False)
    assert resp.status == 303 and resp.headers["Location"].startswith("/console/login")
    resp = await api.client.post("/console/away", data={}, allow_redirects=False)
    assert resp.status == 303
    assert await _absences(api) == []
