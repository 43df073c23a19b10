"""Follow-ups after an acknowledgement: a crash is logged and handed to ``on_failure``, so the
clicker can be told; a follow-up cancelled at shutdown tells nobody."""

from __future__ import annotations

import asyncio

from bot.slack.background import Background


async def test_a_follow_up_that_crashes_reaches_on_failure() -> None:
    background = Background()
    seen: list[BaseException] = []

    async def broken() -> None:
        raise AttributeError("'str' object has no attribute 'get'")

    async def fine() -> None:
        return None

    background.spawn(broken(), "broken", on_failure=seen.append)
    background.spawn(fine(), "fine", on_failure=seen.append)
    await background.drain()
    assert [str(e) for e in seen] == ["'str' object has no attribute 'get'"]
    assert len(background) == 0


async def test_a_failing_on_failure_is_logged_not_raised() -> None:
    background = Background()

    async def broken() -> None:
        raise RuntimeError("boom")

    def also_broken(exc: BaseException) -> None:
        raise ValueError("no response_url") from exc

    background.spawn(broken(), "broken", on_failure=also_broken)
    await background.drain()
    assert len(background) == 0


async def test_a_follow_up_cancelled_at_shutdown_tells_nobody() -> None:
    background = Background()
    seen: list[BaseException] = []
    never = asyncio.Event()

    async def stuck() -> None:
        await never.wait()

    background.spawn(stuck(), "stuck", on_failure=seen.append)
    await background.drain(timeout=0)
    assert seen == []
