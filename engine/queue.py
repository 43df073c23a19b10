"""The operator's queue: pending approvals, oldest first, narrowed by workflow, channel and
approver. A request that names no approvers may be decided by any approver, so it stays in
every approver's queue."""

from __future__ import annotations

from dataclasses import dataclass

from engine.model import Run, TakeoverRequest, TakeoverStatus
from engine.store import SqlStore


@dataclass(frozen=True, slots=True)
class QueueEntry:
    request: TakeoverRequest
    run: Run | None

    @property
    def workflow(self) -> str | None:
        details = self.request.details
        named = details.get("workflow") if isinstance(details, dict) else None
        if isinstance(named, str) and named:
            return named
        return self.run.workflow if self.run else None


@dataclass(frozen=True, slots=True)
class QueueFilter:
    workflow: str | None = None
    channel: str | None = None
    approver: str | None = None

    def matches(self, entry: QueueEntry) -> bool:
        request = entry.request
        if self.workflow and entry.workflow != self.workflow:
            return False
        if self.channel and self.channel not in request.channels:
            return False
        if self.approver and request.approvers and self.approver not in request.approvers:
            return False
        return True


async def pending_queue(
    store: SqlStore, where: QueueFilter | None = None, *, limit: int = 200
) -> list[QueueEntry]:
    """Pending requests matching ``where``, oldest first (at most ``limit``)."""
    where = where or QueueFilter()
    pending = await store.list_takeovers(statuses=[TakeoverStatus.PENDING], limit=5000)
    runs = await store.runs_by_id([r.run_id for r in pending])
    entries = (QueueEntry(r, runs.get(r.run_id)) for r in pending)
    return [e for e in entries if where.matches(e)][:limit]
