"""Takeover requests built in memory, for the tables of the domain's rules."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from engine.domain.model import TakeoverKind, TakeoverRequest, TakeoverStatus

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def takeover_request(**fields: Any) -> TakeoverRequest:
    """A pending approval step of run ``run-1`` asking bob and carol, started by dave; ``fields``
    change any of it."""
    base = TakeoverRequest(
        id="tk-1",
        run_id="run-1",
        step_id="approve",
        kind=TakeoverKind.NODE,
        status=TakeoverStatus.PENDING,
        reason="Refund 10",
        created_at=NOW,
        expires_at=NOW,
        approvers=("bob", "carol"),
        requested_by="dave",
    )
    return dataclasses.replace(base, **fields)
