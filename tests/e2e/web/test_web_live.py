"""The pages that change while a person looks at them, in Chromium: the approval page counts
down and disables its buttons at expiry (no reload), and follows its request when it is decided
elsewhere or expires by the server's clock; the run page's "Waiting for" and status badge follow
a denial live, ending "completed · denied" rather than a green "completed"; the console's queue
gains a request that parks and loses it when it is decided. Expiry is moved with the engine's
ManualClock; every wait is on the page, nothing sleeps."""

from __future__ import annotations

from typing import Any

from bot.console.demo import start_demo
from engine.domain.model import TakeoverRequest, TakeoverStatus
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.web import base_url, deny_over_api, link_path, pending_request

TIMEOUT_MS = 15_000


async def _demo_request(api: Api) -> TakeoverRequest:
    """The demo run's approval, once it has parked."""
    run = await start_demo(api.engine)
    return await pending_request(api.engine, run.id)


async def _page(browser: Any) -> Any:
    context = await browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    return await context.new_page()


async def test_the_approval_page_disables_its_buttons_at_expiry(
    api: Api, browser: Any, clock: ManualClock
) -> None:
    request = await _demo_request(api)
    clock.set(request.expires_at)
    clock.advance(seconds=-2)  # two seconds left by the server's clock
    page = await _page(browser)
    await page.goto(base_url(api) + link_path(api.client, request, "bob"))
    approve = page.get_by_role("button", name="Approve")
    assert await approve.is_enabled()
    assert await page.locator("#countdown-left").inner_text() == "1 min"

    await page.get_by_text("This request expired before anyone decided it.").wait_for()

    for name in ("Approve", "Deny", "Take over"):
        assert await page.get_by_role("button", name=name).is_disabled()
    # ... and look it: faded and grey, no pointer (bot/static/signoff.css).
    looks = await approve.evaluate("b => [getComputedStyle(b).opacity, getComputedStyle(b).cursor]")
    assert float(looks[0]) < 1 and looks[1] == "not-allowed"
    assert (await api.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING


async def test_the_run_page_follows_a_denial_live(api: Api, browser: Any) -> None:
    request = await _demo_request(api)
    page = await _page(browser)
    await sign_in_in_browser(page, api)
    await page.goto(f"{base_url(api)}/console/runs/{request.run_id}")
    waiting = page.locator("#waiting")
    assert await waiting.is_visible()
    assert await waiting.get_by_role("link").count() == 1

    decide = await page.context.new_page()
    await decide.goto(base_url(api) + link_path(api.client, request, "bob"))
    await decide.get_by_role("button", name="Deny").click()
    await decide.locator(".signoff-card__decision", has_text="Denied by").wait_for()

    # Not reloaded: the stream replaced the badge and the waiting line.
    await page.locator("#run-status", has_text="completed · denied").wait_for()
    assert "outcome--bad" in (await page.locator("#run-status").get_attribute("class") or "")
    assert await page.locator("#waiting").is_hidden()
    assert await page.get_by_role("link", name=request.reason).count() == 0


async def sign_in_in_browser(page: Any, api: Api) -> None:
    await page.goto(f"{base_url(api)}/console/login")
    await page.get_by_label("API token (approver or admin)").fill(api.tokens["admin"])
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url("**/console")


async def test_the_console_queue_follows_requests_without_a_reload(api: Api, browser: Any) -> None:
    page = await _page(browser)
    await sign_in_in_browser(page, api)  # alice, of finance: the demo asks her
    assert await page.get_by_text("Nothing is waiting for you").is_visible()
    await page.get_by_text("This list follows the requests").wait_for()  # shown once open

    request = await _demo_request(api)
    row = page.locator(f"#request-{request.id}")
    await row.wait_for()  # not reloaded: the stream added it
    assert request.reason in await row.inner_text()

    await deny_over_api(api, request, "bob", "no")
    await row.wait_for(state="detached")
    await page.get_by_text("Nothing is waiting for you").wait_for()


async def test_an_open_approval_page_shows_a_denial_made_elsewhere(api: Api, browser: Any) -> None:
    request = await _demo_request(api)
    page = await _page(browser)
    await sign_in_in_browser(page, api)
    await page.goto(f"{base_url(api)}/approvals/{request.id}")
    assert await page.get_by_role("button", name="Approve").is_enabled()
    assert await page.locator("#countdown").is_visible()

    await deny_over_api(api, request, "bob", "the customer withdrew it")

    # Not reloaded: the page says who denied it and why, and offers nothing to click.
    await page.get_by_text("Denied by bob just now: the customer withdrew it").wait_for()
    for name in ("Approve", "Deny", "Take over"):
        assert await page.get_by_role("button", name=name).count() == 0
    assert await page.locator("#countdown").count() == 0
    assert await page.locator(".signoff-card--denied").is_visible()


async def test_an_open_approval_page_says_when_the_request_expired(
    api: Api, browser: Any, clock: ManualClock
) -> None:
    request = await _demo_request(api)
    page = await _page(browser)
    await page.goto(base_url(api) + link_path(api.client, request, "bob"))
    assert await page.get_by_role("button", name="Approve").is_enabled()

    clock.set(request.expires_at)  # the server's clock: the page's own countdown has hours left

    await page.get_by_text("This request expired before anyone decided it.").wait_for()
    assert await page.locator("#countdown").count() == 0  # gone, not merely run out
    assert await page.get_by_role("button", name="Approve").count() == 0
    assert await page.locator(".signoff-card--expired").is_visible()
