"""The email tests' SMTP server (``tests.support.smtp``) and clock, one per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.clock import ManualClock
from tests.support.smtp import SmtpServer, smtp_server


@pytest.fixture
async def smtp() -> AsyncIterator[SmtpServer]:
    async with smtp_server() as server:
        yield server


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()
