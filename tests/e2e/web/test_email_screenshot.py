"""The approval email's HTML part in Chromium, as a mail client shows it, and ``docs/images/
email.png`` (docs/email.md) taken from it.

The email is the one a real SMTP server (``tests.support.smtp``) received for bob. Chromium
opens it with scripts off and every network request counted: the message must draw with none
(no remote images, fonts or styles), keep its 600-pixel table on a wide screen, fit a phone's
width without sideways scrolling, and show bob's own link behind its one button. With
``SIGNOFF_UPDATE_SCREENSHOTS=1`` the test writes the picture (on SQLite only: one writer);
otherwise it checks, in words, that the message still shows what the picture shows.
"""

from __future__ import annotations

import os
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.email.harness import email_api, links_in, received
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT
from tests.support.smtp import SmtpServer, smtp_server
from tests.support.web import pending_request

ROOT = Path(__file__).resolve().parents[3]
SCREENSHOT = ROOT / "docs" / "images" / "email.png"
UPDATE = os.environ.get("SIGNOFF_UPDATE_SCREENSHOTS") == "1"
WIDTH = 760
SHOWS = (
    "Approval needed",
    "demo-ledger · refund",
    "Refund 129.90 for A-1042",
    "Approvers",
    "alice, bob, carol",
    "Expires",
    "UTC",
    "Arguments",
    '"amount": "129.90"',
    "Open to approve or deny",
    "Opening the link decides nothing",
)


@pytest.fixture
async def smtp() -> AsyncIterator[SmtpServer]:
    async with smtp_server() as server:
        yield server


@pytest.fixture
async def api(migrated_db_url: str, smtp: SmtpServer) -> AsyncIterator[Api]:
    async with email_api(migrated_db_url, smtp, clock=ManualClock()) as api:
        yield api


def _png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


async def test_the_email_draws_offline_fits_and_links_to_bobs_page(
    api: Api, smtp: SmtpServer, browser: Any
) -> None:
    run, _ = await api.engine.runs.start_run(
        "refund", {"order": "A-1042", "amount": "129.90"}, AGENT
    )
    await pending_request(api.engine, run.id)
    mails = await received(smtp, 3)
    bob = next(m for m in mails if m.rcpt_tos == ("bob@example.com",))
    html = bob.part("html")
    (link,) = links_in(bob)

    requests: list[str] = []
    context = await browser.new_context(
        viewport={"width": WIDTH, "height": 900}, device_scale_factor=1, java_script_enabled=False
    )
    page = await context.new_page()
    page.on("request", lambda r: requests.append(r.url))
    await page.set_content(html, wait_until="load")
    text = (await page.locator("body").inner_text()).casefold()  # the state is in capitals
    at = 0
    for shown in SHOWS:
        index = text.find(shown.casefold(), at)
        assert index >= 0, f"{shown!r} is not in the email (after {text[:at][-80:]!r})"
        at = index
    button = page.get_by_role("link", name="Open to approve or deny")
    assert await button.get_attribute("href") == link
    box = await page.locator("table table").first.bounding_box()
    assert box is not None and 590 <= box["width"] <= 602
    assert [u for u in requests if not u.startswith(("about:", "data:"))] == []
    png = await page.screenshot(full_page=True)

    phone = await browser.new_context(
        viewport={"width": 375, "height": 800}, java_script_enabled=False
    )
    narrow = await phone.new_page()
    await narrow.set_content(html, wait_until="load")
    scroll_width = await narrow.evaluate("document.documentElement.scrollWidth")
    assert scroll_width <= 375, "the email scrolls sideways on a phone"
    await phone.close()
    await context.close()

    if UPDATE and api.engine.db.is_sqlite:
        SCREENSHOT.parent.mkdir(exist_ok=True)
        SCREENSHOT.write_bytes(png)
    committed = SCREENSHOT.read_bytes()
    assert _png_size(committed)[0] == _png_size(png)[0] == WIDTH
    assert abs(_png_size(committed)[1] - _png_size(png)[1]) < 60, "take it again (module doc)"
