"""The reliability suite drives real ``signoff serve`` processes: every test here is marked
``slow``. CI runs the reduced size; ``make reliability`` (``SIGNOFF_RELIABILITY_FULL=1``) the
issue's full size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.cluster import FULL
from tests.reliability.served import Target, config_body, serve

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.slow)


def pytest_report_header() -> str:
    size = "full" if FULL else "reduced (SIGNOFF_RELIABILITY_FULL=1 for full)"
    return f"reliability size: {size}"


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A real ``signoff serve`` (SQLite) with a parked run, one per test module that asks: the
    REST and Slack fuzzing and the schemathesis run. Its teardown fails on any traceback in
    the server's log."""
    with serve(tmp_path_factory.mktemp("serve"), config_body()) as served:
        yield served
