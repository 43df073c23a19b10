"""The web pages in a real browser (Debian's Chromium through Playwright): the console's demo run
followed to ``completed`` on the live timeline, a denial with its reason, an expired link, a
reused link, a link for the wrong person, a form without its CSRF token, a phone-sized screen,
and the page without JavaScript. The README's screenshot: ``test_web_screenshot.py``."""

from __future__ import annotations

import re
from typing import Any

from bot.console.demo import start_demo
from bot.console.login import LOCAL_ADMIN
from bot.tokens import hash_token, new_token
from engine.domain.model import Role, RunStatus, TakeoverStatus
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import wait_status
from tests.support.web import base_url, link_path, pending_request

TIMEOUT_MS = 15_000


async def _parked(api: Api) -> Any:
    run = await start_demo(api.engine)
    return await pending_request(api.engine, run.id)


async def _page(browser: Any, **options: Any) -> Any:
    context = await browser.new_context(**options)
    context.set_default_timeout(TIMEOUT_MS)
    return await context.new_page()


async def test_demo_run_from_the_console_to_completed(api: Api, browser: Any) -> None:
    once = new_token()
    await api.engine.store.put_token(
        LOCAL_ADMIN, Role.ADMIN, "alice", hash_token(once), api.engine.clock.now()
    )
    page = await _page(browser)
    await page.goto(f"{base_url(api)}/console/login?once={once}")
    await page.get_by_role("button", name="Sign in as the local admin").click()
    await page.wait_for_url("**/console")
    await page.get_by_role("button", name="Start demo run").click()
    await page.wait_for_url("**/console/runs/*")
    run_url = page.url

    # The approval appears on the live timeline; follow its link in a second tab.
    approval_link = page.get_by_role("link", name="Open the approval page")
    await approval_link.wait_for()
    # The timeline's item and the status badge arrive as two updates of the stream.
    await page.locator("#run-status", has_text="waiting").wait_for()
    decide = await page.context.new_page()
    await decide.goto(f"{base_url(api)}{await approval_link.get_attribute('href')}")
    assert re.search(r"Refund \d+\.\d\d EUR for A-\d+", await decide.content())
    await decide.get_by_label("Reason or notes (optional)").fill("matches the order")
    await decide.get_by_role("button", name="Approve").click()
    await decide.locator(".signoff-card__decision", has_text="Approved by").wait_for()

    # The first tab was not reloaded: the stream brought the rest of the run.
    assert page.url == run_url
    await page.locator("#run-status", has_text="completed").wait_for()
    await page.get_by_text("Run completed").wait_for()
    timeline = await page.locator("#timeline").inner_text()
    assert "Granted by alice" in timeline and "Step refund completed" in timeline
    assert await page.get_by_text("The run has ended.").is_visible()
    run_id = run_url.rsplit("/", 1)[1]
    assert (await api.engine.store.get_run(run_id)).status == RunStatus.COMPLETED


async def test_deny_with_a_reason(api: Api, browser: Any) -> None:
    request = await _parked(api)
    page = await _page(browser)
    await page.goto(base_url(api) + link_path(api.client, request, "bob"))

    await page.get_by_label("Reason or notes (optional)").fill("customer kept the <b>item</b>")
    await page.get_by_role("button", name="Deny").click()

    await page.locator(".signoff-card__decision", has_text="Denied by").wait_for()
    assert "Reason: customer kept the <b>item</b>" in await page.locator("main").inner_text()
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)  # its onDeny path
    after = await api.engine.store.get_takeover(request.id)
    assert after.status == TakeoverStatus.DENIED and after.decided_by == "bob"


async def test_an_expired_link_shows_what_happened(
    api: Api, browser: Any, clock: ManualClock
) -> None:
    request = await _parked(api)
    clock.advance(minutes=45)
    page = await _page(browser)

    response = await page.goto(base_url(api) + link_path(api.client, request, "bob"))

    assert response is not None and response.status == 410
    text = await page.locator("main").inner_text()
    assert "This request expired before anyone decided it." in text
    assert await page.get_by_role("button", name="Approve").count() == 0


async def test_a_reused_link_shows_who_decided(api: Api, browser: Any) -> None:
    request = await _parked(api)
    link = base_url(api) + link_path(api.client, request, "bob")
    first, second = await _page(browser), await _page(browser)
    await first.goto(link)
    await second.goto(link)  # another tab, showing the buttons

    await first.get_by_role("button", name="Approve").click()
    await first.get_by_text("You approved through this link at").wait_for()

    # Not reloaded: the other tab follows the request and offers nothing to click.
    await second.get_by_text("You approved through this link at").wait_for()
    assert await second.get_by_role("button", name="Approve").count() == 0
    assert "Approved by bob" in await second.locator("main").inner_text()
    assert await second.locator("#countdown").count() == 0


async def test_a_link_for_the_wrong_person(api: Api, browser: Any) -> None:
    request = await _parked(api)
    page = await _page(browser)

    response = await page.goto(base_url(api) + link_path(api.client, request, "dave"))

    assert response is not None and response.status == 403
    assert "dave: you are not an approver for this request" in await page.content()
    assert await page.get_by_role("button", name="Approve").count() == 0
    tampered = link_path(api.client, request, "bob").replace("p=bob", "p=alice")
    response = await page.goto(base_url(api) + tampered)
    assert response is not None and response.status == 403
    assert "this approval link is not valid" in await page.content()


async def test_a_form_without_its_csrf_token_is_refused(api: Api, browser: Any) -> None:
    request = await _parked(api)
    page = await _page(browser)
    await page.goto(base_url(api) + link_path(api.client, request, "bob"))
    await page.locator("input[name=csrf_token]").evaluate("input => input.remove()")

    async with page.expect_response(lambda r: r.request.method == "POST") as posted:
        await page.get_by_role("button", name="Approve").click()

    assert (await posted.value).status == 403
    assert "missing its security token" in await page.content()
    assert (await api.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING


async def test_the_approval_page_fits_a_phone_and_works_without_javascript(
    api: Api, browser: Any
) -> None:
    request = await _parked(api)
    link = base_url(api) + link_path(api.client, request, "bob")
    phone = {"width": 375, "height": 740}
    measured = await _page(browser, viewport=phone)
    await measured.goto(link)
    assert await measured.evaluate("document.documentElement.scrollWidth") <= phone["width"]

    page = await _page(browser, viewport=phone, java_script_enabled=False)
    await page.goto(link)
    await page.get_by_role("button", name="Approve").click()

    await page.locator(".signoff-card__decision", has_text="Approved by").wait_for()
    await wait_status(api.engine, request.run_id, RunStatus.COMPLETED)
