"""The approval queue newest first (``QueueFilter.newest_first``, what a Slack Home tab reads):
the same requests as oldest first, the other way round, and keyed pages that walk back in time,
on SQLite and PostgreSQL."""

from __future__ import annotations

from engine.domain.model import TakeoverStatus
from engine.services.approval_queue import QueueFilter
from tests.integration.test_api_approvals import _queue, api  # noqa: F401 (the fixture)
from tests.support.api import Api


async def test_newest_first_pages_back_in_time(api: Api) -> None:  # noqa: F811
    ids = await _queue(api)
    oldest_first = [ids["pay-1"], ids["open"], ids["call"], ids["pay-2"]]
    queries = api.engine.queries

    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await queries.approval_queue(QueueFilter(newest_first=True), limit=3, cursor=cursor)
        pages += 1
        seen += [e.request.id for e in page.entries]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 2
    assert seen == list(reversed(oldest_first))

    mine = await queries.approval_queue(
        QueueFilter(approver="carol", newest_first=True), limit=10, cursor=None
    )
    assert [e.request.id for e in mine.entries] == [ids["pay-2"], ids["open"], ids["pay-1"]]
    denied = await queries.approval_queue(
        QueueFilter(status=TakeoverStatus.DENIED, newest_first=True), limit=10, cursor=None
    )
    assert denied.entries == []
