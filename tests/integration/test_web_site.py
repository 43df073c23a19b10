"""The pages every site has: a 404 page in the site's layout (the API keeps JSON errors), the
favicon, the privacy and terms pages the Teams package links to, and an ``<h1>`` on every page
a person lands on."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT
from tests.support.web import REFUND_DEMO, link_path, page, pending_request


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, REFUND_DEMO, clock=ManualClock()) as api:
        yield api


async def test_an_unknown_page_is_a_404_page_in_the_sites_layout(api: Api) -> None:
    for path in ("/nope", "/console/nope/deeper", "/approvals/a/b"):
        resp = await api.client.get(path)
        html = await resp.text()
        assert resp.status == 404, path
        assert resp.content_type == "text/html", path
        assert '<link rel="stylesheet" href="/static/signoff.css">' in html
        assert "<h1>Not found</h1>" in html and "There is no page at this address" in html
        assert "default-src 'none'" in resp.headers["Content-Security-Policy"]

    wrong_method = await api.client.delete("/console")
    assert wrong_method.status == 405 and wrong_method.content_type == "text/html"
    assert "GET" in wrong_method.headers["Allow"]


async def test_a_missing_static_file_is_the_404_page(api: Api) -> None:
    for path in ("/static/nope.css", "/static/", "/static/a/b.js", "/static/%2e%2e%2fapp.yaml"):
        resp = await api.client.get(path)
        html = await resp.text()
        assert resp.status == 404, path
        assert resp.content_type == "text/html", path  # typed, not an empty octet-stream
        assert "<h1>Not found</h1>" in html, path
        assert resp.headers["Cache-Control"] == "no-store", path  # nor kept as if it were one
    css = await api.client.get("/static/signoff.css")
    assert css.status == 200 and css.content_type == "text/css"
    assert css.headers.get("Cache-Control") != "no-store"
    head = await api.client.head("/static/live.js")
    assert head.status == 200 and "javascript" in head.content_type


async def test_api_paths_keep_their_json_errors(api: Api) -> None:
    for path in ("/v1/nope", "/v1/runs/nope/whatever"):
        resp = await api.client.get(path)
        assert resp.status == 404 and resp.content_type == "application/json", path
        assert (await resp.json())["error"] == "not_found"


async def test_the_favicon_is_served(api: Api) -> None:
    resp = await api.client.get("/favicon.ico")
    body = await resp.read()
    assert resp.status == 200 and resp.content_type == "image/x-icon"
    assert body[:4] == b"\x00\x00\x01\x00"  # an ICO header
    svg = await api.client.get("/static/favicon.svg")
    assert svg.status == 200 and "<svg" in await svg.text()
    _, html = await page(api.client, "/privacy")
    assert 'rel="icon" href="/favicon.ico"' in html


async def test_the_privacy_and_terms_pages_the_teams_package_links_to(api: Api) -> None:
    status, privacy = await page(api.client, "/privacy")
    assert status == 200 and "<h1>Privacy</h1>" in privacy
    assert "SHA-256 hashes" in privacy and "Signoff deletes" in privacy
    status, terms = await page(api.client, "/terms")
    assert status == 200 and "<h1>Terms of use</h1>" in terms
    assert "Apache License, version 2.0" in terms
    _, login = await page(api.client, "/console/login")
    assert 'href="/privacy"' in login and 'href="/terms"' in login


async def test_the_approval_page_has_a_heading(api: Api) -> None:
    run, _ = await api.engine.runs.start_run("refund-demo", {"order": "A-1", "amount": "1"}, AGENT)
    request = await pending_request(api.engine, run.id)

    status, html = await page(api.client, link_path(api.client, request, "bob"))

    assert status == 200
    assert html.count("<h1") == 1 and "<h1>Approval request</h1>" in html
