"""Outcome-regret calibration: trust an estimator less where it has been wrong before.

    adjusted = base * (1 - regret)

``regret`` is the share of the steps the gate auto-executed for the same agent and node type
that turned out badly: rated 2 or lower by feedback (the latest rating counts), or part of a run
that ended ``failed``. Only steps whose outcome is known are samples (rated, or their run has
ended); the most recent ``window`` of them are used, so old history fades. With fewer than
``MIN_SAMPLES`` samples the evidence is too thin and the base score stands; so does any error
(calibration may only ever make the gate stricter when it knows why).

The query scans the journal, so results are kept per (agent, node type) for ``cache_seconds``
(on the injected clock); feedback recorded through this process clears the cache at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.domain.model import RunStatus
from engine.ports import Clock
from engine.ports.store import GateStore

MIN_SAMPLES = 3
BAD_SCORE = 2  # feedback at or below this is regret


@dataclass(frozen=True, slots=True)
class Regret:
    regret: float  # bad / samples
    samples: int
    bad: int


def adjust(base: float, regret: Regret | None) -> float:
    """The calibrated score (``base`` when there is too little evidence)."""
    if regret is None or regret.samples < MIN_SAMPLES:
        return base
    return base * (1.0 - regret.regret)


class Calibration:
    def __init__(
        self,
        store: GateStore,
        clock: Clock,
        *,
        window: int = 200,
        cache_seconds: float = 30.0,
    ) -> None:
        self.store = store
        self.clock = clock
        self.window = window
        self.cache = timedelta(seconds=cache_seconds)
        self._cached: dict[tuple[str | None, str], tuple[datetime, Regret]] = {}

    async def regret(self, agent: str | None, node_type: str) -> Regret:
        """The regret of auto-executed ``node_type`` steps of ``agent``. Raises on a database
        error (the gate then keeps the base score and journals why)."""
        now = self.clock.now()
        key = (agent, node_type)
        hit = self._cached.get(key)
        if hit is not None and abs(now - hit[0]) < self.cache:
            return hit[1]
        outcomes = await self.store.gated_outcomes(agent, node_type, limit=self.window)
        bad = sum(
            1
            for o in outcomes
            if (o.feedback is not None and o.feedback <= BAD_SCORE)
            or o.run_status == RunStatus.FAILED
        )
        found = Regret(bad / len(outcomes) if outcomes else 0.0, len(outcomes), bad)
        self._cached[key] = (now, found)
        return found

    def invalidate(self) -> None:
        self._cached.clear()
