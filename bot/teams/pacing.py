"""Pacing outbound Teams calls to the Bot Connector's published limits.

Per bot per conversation: 7 operations per 1 s, 8 per 2 s, 60 per 30 s, 1800 per hour; per app
about 30 requests per second (PLATFORM.md; Microsoft Learn, "Optimize your bot: rate limiting
and best practices"). A channel's threads count as one conversation. Sends and updates both
count.

The outbox dispatcher already spaces one channel's messages by the sink's ``min_interval``;
these sliding windows add the longer ones and the app-wide one, which a single interval cannot
express without being needlessly slow for short bursts. The windows are per process: several
replicas each pace themselves, and the connector's 429 + ``Retry-After`` (honoured by the
dispatcher) covers the rest.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

CONVERSATION_LIMITS: tuple[tuple[int, float], ...] = (
    (7, 1.0),
    (8, 2.0),
    (60, 30.0),
    (1800, 3600.0),
)
APP_LIMIT: tuple[int, float] = (30, 1.0)
# Slack added to every window: our clock starts when a call is sent, the service's when it
# arrives, and two calls may travel at different speeds.
MARGIN = 0.1
# Waiting longer than this inside a delivery would hold the outbox claim for nothing: the
# message is handed back to the dispatcher with a retry time instead.
MAX_INLINE_WAIT = 5.0


class Throttled(Exception):
    """The next call must wait ``retry_after`` seconds, longer than is worth waiting inline."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"Teams rate limit: next call in {retry_after:.1f} s")
        self.retry_after = retry_after


class Pacing:
    def __init__(
        self,
        conversation_limits: tuple[tuple[int, float], ...] = CONVERSATION_LIMITS,
        app_limit: tuple[int, float] = APP_LIMIT,
        *,
        now: Callable[[], float] | None = None,
    ) -> None:
        self.conversation_limits = conversation_limits
        self.app_limit = app_limit
        self._now = now
        self._longest = max(seconds for _, seconds in conversation_limits)
        self._calls: dict[str, deque[float]] = {}
        self._app: deque[float] = deque()

    def now(self) -> float:
        return self._now() if self._now is not None else asyncio.get_running_loop().time()

    def wait_time(self, conversation: str) -> float:
        """Seconds until one more call to ``conversation`` fits every window (0: now)."""
        now = self.now()
        calls = self._calls.get(conversation, deque())
        while calls and now - calls[0] >= self._longest + MARGIN:
            calls.popleft()
        while self._app and now - self._app[0] >= self.app_limit[1] + MARGIN:
            self._app.popleft()
        wait = 0.0
        for count, seconds in self.conversation_limits:
            span = seconds + MARGIN
            inside = [t for t in calls if now - t < span]
            if len(inside) >= count:
                wait = max(wait, inside[-count] + span - now)
        count, seconds = self.app_limit
        if len(self._app) >= count:
            wait = max(wait, self._app[-count] + seconds + MARGIN - now)
        return wait

    def try_acquire(self, conversation: str) -> float:
        """Take a slot now and return 0, or return how long to wait for one (nothing taken).
        Checking and taking happen with no await between them, so concurrent deliveries never
        share a slot."""
        wait = self.wait_time(conversation)
        if wait <= 0:
            now = self.now()
            self._calls.setdefault(conversation, deque()).append(now)
            self._app.append(now)
        return max(wait, 0.0)

    async def acquire(self, conversation: str, max_wait: float = MAX_INLINE_WAIT) -> None:
        """Wait for a slot and take it; ``Throttled`` when the wait would exceed ``max_wait``."""
        while wait := self.try_acquire(conversation):
            if wait > max_wait:
                raise Throttled(wait)
            await asyncio.sleep(wait)
