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

A call holds its place in the windows from the moment it is let through until its response
arrives, and from then on counts at the response's time: the service counted it when it
arrived, somewhere in between, so windows kept by response times are never early however long
the call took to leave (the first call of a proactive send waits for a token, say).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable

CONVERSATION_LIMITS: tuple[tuple[int, float], ...] = (
    (7, 1.0),
    (8, 2.0),
    (60, 30.0),
    (1800, 3600.0),
)
APP_LIMIT: tuple[int, float] = (30, 1.0)
# Slack added to every window, for the service's clock and ours.
MARGIN = 0.1
# Waiting longer than this inside a delivery would hold the outbox claim for nothing: the
# message is handed back to the dispatcher with a retry time instead.
MAX_INLINE_WAIT = 5.0


class Throttled(Exception):
    """The next call must wait ``retry_after`` seconds, longer than is worth waiting inline."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"Teams rate limit: next call in {retry_after:.1f} s")
        self.retry_after = retry_after


class _Call:
    """One call's place in the windows: when it was let through, then when it was answered."""

    __slots__ = ("at",)

    def __init__(self, at: float) -> None:
        self.at = at


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
        self._calls: dict[str, deque[_Call]] = {}
        self._app: deque[_Call] = deque()

    def now(self) -> float:
        return self._now() if self._now is not None else asyncio.get_running_loop().time()

    def wait_time(self, conversation: str) -> float:
        """Seconds until one more call to ``conversation`` fits every window (0: now)."""
        now = self.now()
        calls = self._calls.get(conversation, deque())
        while calls and now - calls[0].at >= self._longest + MARGIN:
            calls.popleft()
        while self._app and now - self._app[0].at >= self.app_limit[1] + MARGIN:
            self._app.popleft()
        # Answered calls count at their answer's time, so the times are not always in order.
        times = sorted(c.at for c in calls)
        wait = 0.0
        for count, seconds in self.conversation_limits:
            span = seconds + MARGIN
            inside = [t for t in times if now - t < span]
            if len(inside) >= count:
                wait = max(wait, inside[-count] + span - now)
        count, seconds = self.app_limit
        app = sorted(c.at for c in self._app if now - c.at < seconds + MARGIN)
        if len(app) >= count:
            wait = max(wait, app[-count] + seconds + MARGIN - now)
        return wait

    def try_acquire(self, conversation: str) -> float:
        """Take a place now and return 0, or return how long to wait for one (nothing taken).
        Checking and taking happen with no await between them, so concurrent deliveries never
        share a place."""
        return 0.0 if isinstance(taken := self._take(conversation), _Call) else taken

    def _take(self, conversation: str) -> _Call | float:
        wait = self.wait_time(conversation)
        if wait > 0:
            return wait
        call = _Call(self.now())
        self._calls.setdefault(conversation, deque()).append(call)
        self._app.append(call)
        return call

    @contextlib.asynccontextmanager
    async def call(
        self, conversation: str, max_wait: float = MAX_INLINE_WAIT
    ) -> AsyncIterator[None]:
        """Around one call to the service: wait for a place (``Throttled`` when the wait would
        exceed ``max_wait``), and when the call is over, however it ended, count it from then."""
        while not isinstance(taken := self._take(conversation), _Call):
            if taken > max_wait:
                raise Throttled(taken)
            await asyncio.sleep(taken)
        try:
            yield
        finally:
            taken.at = max(taken.at, self.now())
