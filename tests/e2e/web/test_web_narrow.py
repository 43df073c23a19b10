"""Issue 31: the console at 390 px (a phone held upright). Its pages scrolled sideways (a
filter's select as wide as its longest workflow name, tables of seven columns); now the page
fits, and the tables of runs and of approvals waiting show each row as a card of labelled
lines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.console.demo import start_demo
from bot.console.login import LOCAL_ADMIN
from bot.tokens import hash_token, new_token
from engine.domain.model import Role
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT
from tests.support.web import REFUND_DEMO, base_url, pending_request, running_web

PHONE = {"width": 390, "height": 844}
# A workflow whose name is one long word: the runs' filter lists it, their table shows it.
LONG = "refund-demo-for-the-european-ledger-with-a-very-long-name"
LONG_WORKFLOW = REFUND_DEMO.replace("refund-demo:", f"{LONG}:", 1)


@pytest.fixture
async def api(migrated_db_url: str, clock: ManualClock) -> AsyncIterator[Api]:
    async with running_web(migrated_db_url, REFUND_DEMO + LONG_WORKFLOW, clock=clock) as api:
        yield api


# What the page's own width is, and the widest thing on it (for the message when it fails).
MEASURE = """() => {
  const page = document.scrollingElement.scrollWidth;
  let widest = null, right = 0;
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('.table') && !el.matches('.table')) continue;  // scrolls in its own box
    const r = el.getBoundingClientRect().right;
    if (r > right) { right = r; widest = el.tagName + '.' + el.className; }
  }
  return [page, widest, Math.round(right)];
}"""


@pytest.mark.parametrize("path", ["/console", "/console/runs", "/console/runs/{run}"])
async def test_the_console_fits_a_390_px_screen(api: Api, browser: Any, path: str) -> None:
    for _ in range(2):  # rows enough to show the tables' widest cells
        run = await start_demo(api.engine)
        await pending_request(api.engine, run.id)
        run, _ = await api.engine.runs.start_run(
            LONG, {"order": "A-1"}, AGENT, agent=f"agent-1/{LONG}"
        )
        await pending_request(api.engine, run.id)
    once = new_token()
    await api.engine.store.put_token(
        LOCAL_ADMIN, Role.ADMIN, "alice", hash_token(once), api.engine.clock.now()
    )
    context = await browser.new_context(viewport=PHONE)
    page = await context.new_page()
    await page.goto(f"{base_url(api)}/console/login?once={once}")
    await page.get_by_role("button", name="Sign in as the local admin").click()
    await page.wait_for_url("**/console")

    await page.goto(base_url(api) + path.format(run=run.id))
    assert await page.locator("table, .timeline").count() > 0  # the page has its table
    width, widest, right = await page.evaluate(MEASURE)
    assert width <= PHONE["width"], f"{path}: {width} px wide; widest {widest} to {right} px"
    # The rows stack into cards at this width: nothing to scroll sideways in the table either.
    for box in await page.locator(".table").all():
        assert await box.evaluate("b => b.scrollWidth <= b.clientWidth"), path
