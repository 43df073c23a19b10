"""The approval queue newest first (``QueueFilter.newest_first``, what a Slack Home tab reads):
the same requests as oldest first, the other way round, and keyed pages that walk back in time,
on SQLite and PostgreSQL. And a person's inbox (``Approvals.inbox``), read from that queue: what
waits for their own decision, either way round, with whether more wait."""

from __future__ import annotations

from engine.domain.model import Role, TakeoverStatus
from engine.services.approval_queue import Inbox, QueueFilter
from tests.integration.test_api_approvals import _queue, api  # noqa: F401 (the fixture)
from tests.support.api import Api
from tests.support.engines import person


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


async def test_a_persons_inbox_is_what_waits_for_their_own_decision(api: Api) -> None:  # noqa: F811
    ids = await _queue(api)
    approvals = api.engine.approvals
    carol = person("carol")

    def shown(inbox: Inbox) -> tuple[list[str], bool]:
        return [e.request.id for e in inbox.entries], inbox.more

    newest = await approvals.inbox(carol, limit=10, newest_first=True)
    assert shown(newest) == ([ids["pay-2"], ids["open"], ids["pay-1"]], False)
    assert shown(await approvals.inbox(carol, limit=1)) == ([ids["pay-1"]], True)
    assert shown(await approvals.inbox(carol, limit=3)) == (
        [ids["pay-1"], ids["open"], ids["pay-2"]],
        False,
    )
    # An admin's inbox holds what names them, not all they could decide by override.
    assert shown(await approvals.inbox(person("alice", Role.ADMIN), limit=10)) == (
        [ids["open"]],
        False,
    )
    await approvals.deny(ids["pay-1"], carol, notes="no")
    assert shown(await approvals.inbox(carol, limit=10)) == ([ids["open"], ids["pay-2"]], False)
