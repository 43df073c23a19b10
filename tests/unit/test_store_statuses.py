"""The SQL store takes every status from the domain's lifecycles: no status is spelled out in
its source, and the sets it derives from the tables are the ones the design names."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import column

from engine.adapters.store.statuses import may_become, status_in
from engine.domain.model import (
    LIVE_RUN_STATUSES,
    OPEN_TAKEOVER_STATUSES,
    RUN_ALLOWED,
    RunStatus,
    TakeoverStatus,
    leading_to,
)
from engine.domain.outbox import OUTBOX_ALLOWED, OutboxStatus

STORE = Path(__file__).parents[2] / "engine" / "adapters" / "store"
STATUSES = {s.value for kind in (RunStatus, TakeoverStatus, OutboxStatus) for s in kind}


def test_no_status_literal_in_the_store() -> None:
    quoted = re.compile(r"""["']([a-z_]+)["']""")
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(STORE.glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if any(m.group(1) in STATUSES for m in quoted.finditer(line))
    ]
    assert found == []


def test_the_derived_sets() -> None:
    assert leading_to(RunStatus.WAITING, RUN_ALLOWED) == {RunStatus.QUEUED, RunStatus.RUNNING}
    assert LIVE_RUN_STATUSES == {RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING}
    assert OPEN_TAKEOVER_STATUSES == {TakeoverStatus.PENDING, TakeoverStatus.GRANTED}


def test_the_outbox_lifecycle_keeps_its_stored_names() -> None:
    assert [s.value for s in OutboxStatus] == ["pending", "sent", "failed"]
    assert OUTBOX_ALLOWED[OutboxStatus.PENDING] == {OutboxStatus.SENT, OutboxStatus.FAILED}
    assert not OUTBOX_ALLOWED[OutboxStatus.SENT] and not OUTBOX_ALLOWED[OutboxStatus.FAILED]


def test_conditions_name_the_table_sources_in_enum_order() -> None:
    status = column("status")
    sources = may_become(status, RunStatus.CANCELLED).compile(
        compile_kwargs={"literal_binds": True}
    )
    assert str(sources) == "status IN ('queued', 'running', 'waiting')"
    one = status_in(status, [TakeoverStatus.PENDING]).compile(
        compile_kwargs={"literal_binds": True}
    )
    assert str(one) == "status = 'pending'"
