"""Debian's Chromium driven by Playwright (the ``playwright`` package from PyPI; no browser is
ever downloaded: it launches ``/usr/bin/chromium``).

Without Chromium or the package the browser tests skip, saying why; with
``SIGNOFF_REQUIRE_BROWSER=1`` (CI) they fail instead. The flags are the ones this machine kind
needs: no sandbox as root, and no background networking (the network is closed).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any, NoReturn

import pytest

from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.web import running_web

CHROMIUM = "/usr/bin/chromium"
REQUIRE_BROWSER_VAR = "SIGNOFF_REQUIRE_BROWSER"
FLAGS = [
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_BROWSER_VAR) == "1":
        pytest.fail(f"{reason} (and {REQUIRE_BROWSER_VAR}=1)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[dev]')")
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, chromium_sandbox=False, args=FLAGS
        )
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
def clock() -> ManualClock:
    """The engine's clock: the browser tests move time instead of waiting."""
    return ManualClock()


@pytest.fixture
async def api(migrated_db_url: str, clock: ManualClock) -> AsyncIterator[Api]:
    async with running_web(migrated_db_url, clock=clock) as api:
        yield api
