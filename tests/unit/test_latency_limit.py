"""The hostile suite's /healthz limit grows with the machine's load, never below 1 s."""

import os

import pytest

from tests.reliability.hostile import LATENCY_LIMIT, latency_limit

CORES = os.cpu_count() or 1


@pytest.mark.parametrize(
    ("load", "limit"),
    [(0.0, LATENCY_LIMIT), (CORES * 0.9, LATENCY_LIMIT), (CORES * 3.0, 3 * LATENCY_LIMIT)],
)
def test_the_limit_is_one_second_until_the_machine_is_oversubscribed(
    load: float, limit: float
) -> None:
    assert latency_limit(load) == pytest.approx(limit)
