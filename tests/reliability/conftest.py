"""The reliability suite drives real ``signoff serve`` processes: every test here is marked
``slow``. CI runs the reduced size; ``make reliability`` (``SIGNOFF_RELIABILITY_FULL=1``) the
issue's full size."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.cluster import FULL

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.slow)


def pytest_report_header() -> str:
    size = "full" if FULL else "reduced (SIGNOFF_RELIABILITY_FULL=1 for full)"
    return f"reliability size: {size}"
