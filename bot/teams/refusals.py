"""The log of refused Teams requests, bounded: anyone who can reach ``/api/messages`` can make
it refuse, so one WARNING line per refusal would let them flood the log.

Each kind of refusal (a fixed set: ``unauthenticated``, ``wrong_tenant``; never a word of the
request) is logged in full the first time, then counted: while refusals of that kind keep
coming, one line every ``every`` seconds says how many were refused since the last line, and
the reason of the latest. A kind quiet for a whole window starts over (its next refusal is
logged in full). So a flood of any length writes about one line per kind per ``every`` seconds.

Time is the engine's ``Clock`` (tests move it); ``flush`` writes the counts of windows that have
ended, and the channel calls it every ``every`` seconds so a flood's last count is not held back
until the next refusal.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.ports import Clock

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60.0
_DETAIL_MAX = 200  # the reason can quote the request (a token's claims): bounded, and repr'd


@dataclass
class _Window:
    ends: datetime
    count: int = 0  # refusals since the line that opened it
    last: str = ""


class RefusalLog:
    """Warnings for refused requests, at most about one line per kind per ``every`` seconds."""

    def __init__(
        self, clock: Clock, *, every: float = WINDOW_SECONDS, logger: logging.Logger = log
    ) -> None:
        self.clock = clock
        self.every = timedelta(seconds=every)
        self.log = logger
        self._windows: dict[str, _Window] = {}

    def refused(self, kind: str, what: str, reason: object) -> None:
        """One request refused: ``kind`` is the class of refusal (the caller's constant),
        ``what`` its sentence ("rejected an unauthenticated request"), ``reason`` the detail."""
        now = self.clock.now()
        detail = str(reason)[:_DETAIL_MAX]
        self._close_ended(kind, now)
        window = self._windows.get(kind)
        if window is None:
            self.log.warning("teams: %s: %r", what, detail)
            self._windows[kind] = _Window(now + self.every)
            return
        window.count += 1
        window.last = detail

    def flush(self) -> None:
        """Write the counts of the windows that have ended (the channel calls it on a timer)."""
        now = self.clock.now()
        for kind in list(self._windows):
            self._close_ended(kind, now)

    def _close_ended(self, kind: str, now: datetime) -> None:
        window = self._windows.get(kind)
        if window is None or now < window.ends:
            return
        if window.count == 0:
            del self._windows[kind]  # quiet for a whole window: the next one is logged in full
            return
        seconds = round(self.every.total_seconds())
        self.log.warning(
            "teams: refused %d more %s requests in the last %d s (the latest: %r)",
            window.count,
            kind.replace("_", " "),
            seconds,
            window.last,
        )
        self._windows[kind] = _Window(now + self.every)

    async def run(self) -> None:
        """Flush every ``every`` seconds, on the clock (a background task)."""
        while True:
            await self.clock.sleep(self.every.total_seconds())
            self.flush()


__all__ = ["WINDOW_SECONDS", "RefusalLog"]
