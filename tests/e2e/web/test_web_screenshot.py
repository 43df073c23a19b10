"""The README's screenshot, ``docs/approval.png``, taken from the real approval page.

The page is the one ``signoff demo`` gives with the shipped ``app.yaml`` (its people, its
finance group, its demo workflow), seen by bob through his personal link. With
``SIGNOFF_UPDATE_SCREENSHOTS=1`` the test writes ``docs/approval.png`` (on SQLite only: one
writer); otherwise it checks that the page still shows what the committed picture shows, in
words, not pixels: a changed page fails here until the picture is taken again.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from bot.app import create_app
from bot.console.demo import start_demo
from engine.assembly import EngineOptions
from engine.config import parse_config
from tests.support.api import Api, serving
from tests.support.clock import ManualClock
from tests.support.ids import SequentialIds
from tests.support.process import free_port
from tests.support.web import base_url, link_path, pending_request

ROOT = Path(__file__).resolve().parents[3]
SCREENSHOT = ROOT / "docs" / "approval.png"
UPDATE = os.environ.get("SIGNOFF_UPDATE_SCREENSHOTS") == "1"
WIDTH = 760
# What the picture shows, top to bottom (the demo's order and amount vary with its ids).
SHOWS = (
    "Approval request",
    "Deciding as bob through your personal link.",
    "Expires in 30 min",
    "Approval needed",
    "demo-ledger · refund",
    re.compile(r"Refund \d+\.\d\d EUR for A-\d+"),
    "Approvers\nalice, bob\nExpires",  # the shipped app.yaml's finance group
    "Output of step lookup",
    "Arguments",
    "Reason or notes (optional)",
    "Approve\nDeny\nTake over",
    "History of this request",
    "Run waiting for a decision",
)


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    """The shipped ``app.yaml``, as ``signoff serve`` reads it, on the test's database."""
    port = free_port()
    env = {
        "SIGNOFF_DATABASE_URL": migrated_db_url,
        "SIGNOFF_PORT": str(port),
        "SIGNOFF_SECRET_KEY": "screenshot-secret-key-of-32-chars!",
    }
    config = parse_config((ROOT / "app.yaml").read_text(), env)
    options = EngineOptions(clock=ManualClock(), ids=SequentialIds("id"), owner="screenshot")
    server = TestServer(create_app(config, options), host="127.0.0.1", port=port)
    async with serving(server) as api:
        yield api


def _png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG"
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk comes first
    return width, height


async def test_the_readme_screenshot_shows_the_approval_page(api: Api, browser: Any) -> None:
    run = await start_demo(api.engine)
    request = await pending_request(api.engine, run.id)
    context = await browser.new_context(
        viewport={"width": WIDTH, "height": 900}, device_scale_factor=1
    )
    page = await context.new_page()
    await page.goto(base_url(api) + link_path(api.client, request, "bob"))
    await page.get_by_role("button", name="Approve").wait_for()

    text = await page.locator("body").inner_text()
    at = 0
    for shown in SHOWS:
        found = shown.search(text, at) if isinstance(shown, re.Pattern) else None
        index = found.start() if found else text.find(str(shown), at)
        assert index >= 0, f"{shown!r} is not on the page (after {text[:at][-80:]!r})"
        at = index
    assert not re.search("[\U0001f000-\U0001faff\u2300-\u23ff\u2600-\u27bf]", text)

    png = await page.screenshot(full_page=True)
    if UPDATE and api.engine.db.is_sqlite:
        SCREENSHOT.write_bytes(png)
    committed = SCREENSHOT.read_bytes()
    assert _png_size(committed)[0] == _png_size(png)[0] == WIDTH
    # The same page at the same width is about as tall; a section added or lost is not.
    assert abs(_png_size(committed)[1] - _png_size(png)[1]) < 60, "take it again (module doc)"
