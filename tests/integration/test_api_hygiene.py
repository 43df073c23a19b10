"""HTTP hygiene at the boundary (issue 22): the sign-in redirect stays on this server; JSON that
no JSON reader but Python's accepts (NaN, Infinity), nested without bound, with huge integers
or NUL, and NUL in a path id or a query are 400 with ``{error, message}`` and change nothing, on
SQLite and PostgreSQL; every response carries the security headers, aiohttp's own 404 and 405
too, a 405 names the allowed methods, and ``Server`` names no library version."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp.test_utils import TestServer

from bot.app import create_app
from engine.adapters.store.migrate import upgrade_to_head
from engine.assembly import EngineOptions
from engine.config import parse_config
from engine.domain.model import TakeoverStatus
from tests.support.api import Api, config_text, running_api, serving
from tests.support.clock import ManualClock
from tests.support.engines import AGENT
from tests.support.web import REFUND_DEMO, link_path, page, pending_request, sign_in, submit

SECURITY = ("X-Content-Type-Options", "Content-Security-Policy", "Referrer-Policy")


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, REFUND_DEMO) as api:
        yield api


async def runs(api: Api) -> list[Any]:
    status, body = await api.call("GET", "/v1/runs", as_="agent")
    assert status == 200, body
    return list(body["runs"])


async def post_raw(api: Api, path: str, raw: bytes, as_: str = "agent") -> tuple[int, Any]:
    resp = await api.client.post(
        path,
        data=raw,
        headers={"Authorization": f"Bearer {api.tokens[as_]}", "Content-Type": "application/json"},
    )
    assert resp.content_type == "application/json", await resp.text()
    return resp.status, await resp.json()


HOSTILE_BODIES = {
    "nan": b'{"workflow": "refund-demo", "input": {"order": "o-1", "amount": NaN}}',
    "infinity": b'{"workflow": "refund-demo", "input": {"amount": -Infinity}}',
    "overflow": b'{"workflow": "refund-demo", "input": {"amount": 1e400}}',
    "big_int": b'{"workflow": "refund-demo", "input": {"amount": ' + b"9" * 5000 + b"}}",
    "deep": b'{"workflow": "refund-demo", "input": ' + b'{"a": ' * 10_000 + b"1" + b"}" * 10_001,
    "deep_list": b'{"workflow": "refund-demo", "input": {"a": '
    + b"[" * 10_000
    + b"]" * 10_000
    + b"}}",
    "nul_key": b'{"workflow": "refund-demo", "idempotencyKey": "k\\u0000"}',
    "nul_agent": b'{"workflow": "refund-demo", "agent": "a\\u0000b"}',
    "surrogate": b'{"workflow": "refund-demo", "input": {"x": "\\ud800"}}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE_BODIES))
async def test_json_no_reader_accepts_is_refused_and_nothing_is_stored(api: Api, name: str) -> None:
    status, body = await post_raw(api, "/v1/runs", HOSTILE_BODIES[name])
    assert status == 400, body
    assert body["error"] == "invalid_request" and body["message"], body
    assert await runs(api) == []


async def test_an_accepted_run_lists_as_valid_json(api: Api) -> None:
    status, run = await post_raw(
        api, "/v1/runs", b'{"workflow": "refund-demo", "input": {"order": "o-1", "amount": 1.5}}'
    )
    assert status == 201, run
    resp = await api.client.get(
        "/v1/runs", headers={"Authorization": "Bearer " + api.tokens["agent"]}
    )
    assert b"NaN" not in await resp.read()


@pytest.mark.parametrize(
    "path",
    [
        "/v1/runs/r%00",
        "/v1/runs/r%00/journal",
        "/v1/runs/r%00/takeover",
        "/v1/calls/c%00",
        "/v1/runs?workflow=w%00",
        "/v1/runs?status=running%00",
        "/v1/ledger?runId=%00",
        "/v1/gate?agent=a%00",
        "/v1/runs?x%00=1",
    ],
)
async def test_nul_in_a_path_id_or_a_query_is_a_400(api: Api, path: str) -> None:
    status, body = await api.call("GET", path, as_="admin")
    assert status == 400, body
    assert body["error"] == "invalid_request" and "NUL" in body["message"], body


async def test_nul_in_a_path_without_a_token_is_still_a_401(api: Api) -> None:
    status, body = await api.call("GET", "/v1/runs/r%00")
    assert status == 401, body


async def test_nul_in_a_console_path_is_a_400_page(api: Api) -> None:
    await sign_in(api.client, api.tokens["admin"])
    status, html = await page(api.client, "/console/runs/r%00")
    assert status == 400, html
    assert "NUL" in html
    status, html = await page(api.client, "/approvals/tk%00")
    assert status == 400, html


async def test_nul_in_an_approval_form_is_refused_and_nothing_is_decided(api: Api) -> None:
    run, _ = await api.engine.runs.start_run("refund-demo", {"order": "o-1", "amount": "1"}, AGENT)
    request = await pending_request(api.engine, run.id)
    link = link_path(api.client, request, "bob")
    resp = await submit(api.client, link, {"action": "grant", "reason": "fine\x00"})
    assert resp.status == 400, await resp.text()
    assert "NUL" in await resp.text()
    assert (await api.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING


@pytest.mark.parametrize("after", ["9" * 5_000, "\u0661\u0662", "-1"])
async def test_a_timeline_resumed_after_any_event_id_is_no_500(api: Api, after: str) -> None:
    await sign_in(api.client, api.tokens["admin"])
    for headers, query in (({"Last-Event-ID": after}, ""), ({}, "?after=" + quote(after))):
        resp = await api.client.get("/console/runs/nope/events" + query, headers=headers)
        assert resp.status == 404, await resp.text()


# -- the sign-in redirect ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    ["/%09/evil.example/phish", "/%0a/evil.example", "/%0d%0aSet-Cookie:%20x=1", "/x%7f"],
)
async def test_a_control_character_in_next_is_a_400(api: Api, target: str) -> None:
    status, html = await page(api.client, "/console/login?next=" + target)
    assert status == 400, html
    await sign_in(api.client, api.tokens["admin"])  # signed in, GET would redirect at once
    resp = await api.client.get("/console/login?next=" + target, allow_redirects=False)
    assert resp.status == 400, resp.headers.get("Location")
    resp = await submit(
        api.client,
        "/console/login",
        {"token": api.tokens["admin"], "next": "/\t/evil.example"},
        csrf_from="/console",
    )
    assert resp.status == 400, resp.headers.get("Location")


@pytest.mark.parametrize(
    "target",
    ["//evil.example", "/\\evil.example", "/a\\..\\\\evil", "https://evil.example", "evil", ""],
)
async def test_next_elsewhere_goes_home(api: Api, target: str) -> None:
    await sign_in(api.client, api.tokens["admin"])
    resp = await api.client.get(
        "/console/login?next=" + quote(target, safe=""), allow_redirects=False
    )
    assert resp.status == 303
    assert resp.headers["Location"] == "/console"


async def test_next_on_this_server_is_kept(api: Api) -> None:
    await sign_in(api.client, api.tokens["admin"])
    resp = await api.client.get(
        "/console/login?next=/console/runs%3Fstatus%3Dwaiting", allow_redirects=False
    )
    assert resp.status == 303
    assert resp.headers["Location"] == "/console/runs?status=waiting"


# -- headers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/runs", 200),
        ("GET", "/healthz", 200),
        ("GET", "/v1/nowhere", 404),
        ("DELETE", "/v1/runs", 405),
        ("GET", "/console/login", 200),
        ("GET", "/nowhere", 404),  # aiohttp's own page
        ("PUT", "/console/login", 405),  # aiohttp's own page
    ],
)
async def test_every_response_carries_the_security_headers(
    api: Api, method: str, path: str, status: int
) -> None:
    resp = await api.client.request(
        method, path, headers={"Authorization": f"Bearer {api.tokens['agent']}"}
    )
    assert resp.status == status
    for name in SECURITY:
        assert name in resp.headers, (name, dict(resp.headers))
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["Cache-Control"] == "no-store"
    assert "aiohttp" not in resp.headers.get("Server", "").lower()
    assert "python" not in resp.headers.get("Server", "").lower()
    assert "Strict-Transport-Security" not in resp.headers  # publicUrl is http here
    if status == 405:
        assert "GET" in resp.headers["Allow"], dict(resp.headers)


async def test_https_public_url_sends_hsts(sqlite_url: str) -> None:
    await upgrade_to_head(sqlite_url)
    text = config_text(sqlite_url, REFUND_DEMO).replace(
        "'http://signoff.test'", "'https://signoff.example'"
    )
    app = create_app(parse_config(text, {}), EngineOptions(clock=ManualClock()))
    async with serving(TestServer(app)) as api:
        for path in ("/healthz", "/console/login", "/nowhere", "/v1/runs"):
            resp = await api.client.get(path)
            assert resp.headers["Strict-Transport-Security"].startswith("max-age="), path


async def test_a_short_flat_body_is_checked_on_the_loop_a_workflow_in_a_thread(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hop to a thread cost more than checking a start's or a decision's body; a stored
    workflow's schema is checked node by node and stays off the event loop, however short."""
    import asyncio

    from bot.api import bodies

    checked_in_threads: list[str] = []
    real = asyncio.to_thread

    async def noted(function: Any, *args: Any) -> Any:
        checked_in_threads.append(function.__name__)
        return await real(function, *args)

    monkeypatch.setattr(bodies.asyncio, "to_thread", noted)
    status, _ = await api.call(
        "POST", "/v1/runs", as_="agent", json={"workflow": "refund-demo", "input": {"x": 1}}
    )
    assert status == 201 and checked_in_threads == []
    status, body = await api.call(
        "POST",
        "/v1/runs",
        as_="agent",
        json={"workflow": "refund-demo", "input": {"x": 2}, "no": 1},
    )
    assert status == 400 and "no" in body["message"], body  # checked all the same
    stored = {"name": "w", "nodes": [{"id": "a", "type": "approval", "channels": ["web"]}]}
    status, _ = await api.call("POST", "/v1/workflows", as_="admin", json=stored)
    assert status in (200, 201) and checked_in_threads == ["_problems"]


async def test_a_short_body_that_passed_is_not_checked_again(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same bytes pass the same flat schema: a decision's ``{"release": true}`` is checked
    once. A body that failed is checked every time, and refused every time."""
    from bot.api import bodies

    checked: list[dict[str, Any]] = []
    real = bodies._problems

    def counted(validator: Any, body: dict[str, Any]) -> Any:
        checked.append(body)
        return real(validator, body)

    monkeypatch.setattr(bodies, "_problems", counted)
    monkeypatch.setattr(bodies, "_PASSED", {})
    start = b'{"workflow": "refund-demo", "input": {"order": "o-1"}}'
    for _ in range(3):
        assert (await post_raw(api, "/v1/runs", start))[0] == 201
    assert len(checked) == 1
    wrong = b'{"workflow": "refund-demo", "input": {}, "extra": 1}'
    for _ in range(2):
        status, body = await post_raw(api, "/v1/runs", wrong)
        assert status == 400 and "extra" in body["message"], body
    assert len(checked) == 3
    monkeypatch.setattr(bodies, "_PASSED_SIZE", 2)
    for order in ("o-2", "o-3", "o-4"):  # the first of them goes out
        raw = b'{"workflow": "refund-demo", "input": {"order": "%s"}}' % order.encode()
        assert (await post_raw(api, "/v1/runs", raw))[0] == 201
    assert len(bodies._PASSED) == 2 and len(checked) == 6
