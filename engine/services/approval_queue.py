"""The operator's queue: approvals across runs, oldest first (or newest first, as the Slack
Home tab reads a person's), narrowed by status, approver, workflow, connector, channel and kind,
a page at a time. ``GET /v1/approvals`` and the console's queue page both read it here.

A request that names no approvers may be decided by any approver, so it stays in every
approver's queue. Every kind of request is in it: approval nodes, gate diversions, held calls
(``POST /v1/calls``) and manual takeovers share one table.

The cursor is the ``(created_at, id)`` of the last request of a page, written
``<microseconds since 1970>.<id>`` (``CURSOR_PATTERN``); the next page starts after it. Any
cursor of that shape is a position in the queue, so the API's schema says exactly which
cursors it takes: one not given by a page merely starts somewhere else.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from engine.domain.errors import InvalidRequest
from engine.domain.model import Run, TakeoverKind, TakeoverRequest, TakeoverStatus
from engine.domain.records import QueueQuery
from engine.ports.store import QueueStore

MAX_PAGE = 200
# A position: microseconds since 1970 (16 digits reach the year 2286) and a request id.
CURSOR_PATTERN = r"^[0-9]{1,16}\.[A-Za-z0-9_:-]{1,200}$"
CURSOR_RE = re.compile(CURSOR_PATTERN)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_PAGE = 50


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
    """What the queue is narrowed to; None leaves a field open."""

    workflow: str | None = None
    channel: str | None = None
    approver: str | None = None
    connector: str | None = None
    kind: TakeoverKind | None = None
    status: TakeoverStatus = TakeoverStatus.PENDING
    newest_first: bool = False  # the order, not a narrowing (a person's recent decisions)

    @property
    def narrowed(self) -> bool:
        """Whether anything but the status narrows it."""
        return any((self.workflow, self.channel, self.approver, self.connector, self.kind))


@dataclass(frozen=True, slots=True)
class QueuePage:
    entries: list[QueueEntry]
    next_cursor: str | None  # None: this is the last page


async def approval_queue(
    store: QueueStore,
    where: QueueFilter | None = None,
    *,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
) -> QueuePage:
    """One page of the requests matching ``where``, oldest first, starting after ``cursor``
    (a page's ``next_cursor``). ``limit`` is 1..``MAX_PAGE``."""
    where = where or QueueFilter()
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequest(f"limit must be 1..{MAX_PAGE}, got {limit}")
    found = await store.approval_queue(
        QueueQuery(
            status=where.status,
            approver=where.approver,
            workflow=where.workflow,
            connector=where.connector,
            channel=where.channel,
            kind=where.kind,
            after=_read_cursor(cursor) if cursor else None,
            limit=limit + 1,  # one more tells whether another page follows
            newest_first=where.newest_first,
        )
    )
    entries = [QueueEntry(request, run) for request, run in found[:limit]]
    more = len(found) > limit
    return QueuePage(entries, _cursor(entries[-1].request) if more and entries else None)


@dataclass(frozen=True, slots=True)
class Inbox:
    """What waits for one person's decision: at most the number asked for, and whether more
    wait."""

    entries: list[QueueEntry]
    more: bool


async def read_inbox(
    store: QueueStore,
    person: str | None,
    waits: Callable[[TakeoverRequest], bool],
    *,
    limit: int,
    newest_first: bool = False,
) -> Inbox:
    """The pending requests that wait for ``person`` (``waits``: ``Approvals.awaits``), oldest
    (or newest) first: their queue (requests naming them, or nobody) read page by page and kept
    by ``waits``, until ``limit`` are found (and one more, to tell whether more wait)."""
    where = QueueFilter(approver=person, newest_first=newest_first)
    found: list[QueueEntry] = []
    cursor: str | None = None
    while True:
        page = await approval_queue(store, where, limit=MAX_PAGE, cursor=cursor)
        found += [e for e in page.entries if waits(e.request)]
        cursor = page.next_cursor
        if len(found) > limit or cursor is None:
            return Inbox(found[:limit], len(found) > limit)


def _cursor(request: TakeoverRequest) -> str:
    since = request.created_at - _EPOCH
    micros = (since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds
    return f"{micros}.{request.id}"


def _read_cursor(cursor: str) -> tuple[datetime, str]:
    if CURSOR_RE.fullmatch(cursor) is None:
        raise InvalidRequest(
            "cursor: not a cursor this queue gave (pass a page's nextCursor as it is)"
        )
    micros, _, request_id = cursor.partition(".")
    return _EPOCH + timedelta(microseconds=int(micros)), request_id
