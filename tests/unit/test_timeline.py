"""A journal read as a timeline: labels, durations, gate scores, deciders, read incrementally."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from engine.domain.model import JournalEntry, JournalEvent
from engine.domain.timeline import TimelineReader, human_duration, minutes_text

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _entry(
    seq: int, event: JournalEvent, step: str | None, seconds: float, **data: Any
) -> JournalEntry:
    return JournalEntry("run-1", seq, event, step, data, T0 + timedelta(seconds=seconds))


JOURNAL = [
    _entry(1, JournalEvent.RUN_STARTED, None, 0, workflow="refund-demo", requestedBy="demo-agent"),
    _entry(2, JournalEvent.STEP_STARTED, "lookup", 0.1, nodeType="connector"),
    _entry(3, JournalEvent.STEP_COMPLETED, "lookup", 0.35, output={"order": "A-1"}),
    _entry(4, JournalEvent.CONFIDENCE_EVALUATED, "refund", 0.4, score=0.6, threshold=0.75,
           decision="divert", estimator="verbalization"),
    _entry(5, JournalEvent.TAKEOVER_REQUESTED, "approve", 0.5, requestId="tk-1", reason="Refund"),
    _entry(6, JournalEvent.RUN_WAITING, "approve", 0.5, requestId="tk-1"),
    _entry(7, JournalEvent.TAKEOVER_GRANTED, "approve", 90.5, requestId="tk-1", by="bob",
           notes="ok", approvals=1, approvalsRequired=2, final=False),
    _entry(8, JournalEvent.TAKEOVER_GRANTED, "approve", 150.5, requestId="tk-1", by="alice",
           approvals=2, approvalsRequired=2, final=True),
    _entry(9, JournalEvent.TAKEOVER_RELEASED, "approve", 150.5, requestId="tk-1", by="alice"),
    _entry(10, JournalEvent.RUN_RESUMED, "approve", 150.5, requestId="tk-1"),
    _entry(11, JournalEvent.RUN_COMPLETED, None, 151, output={"entry": 2}),
]  # fmt: skip


def test_each_entry_reads_as_what_happened() -> None:
    items = TimelineReader().read(JOURNAL)

    assert [i.label for i in items] == [
        "Run of refund-demo started",
        "Step lookup started (connector)",
        "Step lookup completed",
        "Confidence 0.60: divert",
        "Approval requested",
        "Run waiting for a decision",
        "Granted by bob (1 of 2)",
        "Granted by alice (2 of 2)",
        "Released by alice",
        "Run resumed",
        "Run completed",
    ]
    by_seq = {i.seq: i for i in items}
    assert by_seq[1].actor == "demo-agent"
    assert by_seq[3].duration == "250 ms" and by_seq[3].tone == "ok"
    assert (by_seq[4].score, by_seq[4].threshold, by_seq[4].tone) == (0.6, 0.75, "wait")
    assert by_seq[7].duration == "1 min 30 s" and by_seq[7].detail == "ok"
    assert by_seq[7].tone == "wait" and by_seq[8].tone == "ok"
    assert by_seq[7].request_id == "tk-1"
    assert by_seq[11].duration == "2 min 31 s"


def test_reading_in_pieces_keeps_what_earlier_entries_said() -> None:
    reader = TimelineReader()
    first = reader.read(JOURNAL[:6])
    rest = reader.read(JOURNAL)  # a stream that reads everything again sends only what is new

    assert [i.seq for i in first] == [1, 2, 3, 4, 5, 6]
    assert [i.seq for i in rest] == [7, 8, 9, 10, 11]
    assert rest[0].duration == "1 min 30 s"  # measured from the request seen in the first piece


def test_failures_denials_and_expiry() -> None:
    items = TimelineReader().read(
        [
            _entry(1, JournalEvent.STEP_STARTED, "pay", 0),
            _entry(2, JournalEvent.STEP_FAILED, "pay", 2, error="HTTP 503", final=False),
            _entry(3, JournalEvent.TAKEOVER_DENIED, "gate", 3, requestId="x", by="carol",
                   notes="<b>no</b>"),
            _entry(4, JournalEvent.TAKEOVER_EXPIRED, "gate", 4, requestId="y",
                   behavior="auto-reject"),
            _entry(5, JournalEvent.RUN_FAILED, None, 5, error="denied"),
        ]
    )  # fmt: skip
    assert [i.label for i in items] == [
        "Step pay started",
        "Step pay failed (will retry)",
        "Denied by carol",
        "Approval expired (auto-reject)",
        "Run failed",
    ]
    assert items[1].detail == "HTTP 503" and items[2].detail == "<b>no</b>"
    assert {i.tone for i in items[1:]} == {"bad"}


def test_human_durations() -> None:
    assert [human_duration(s) for s in (0.0004, 0.25, 4.21, 61, 3 * 3600 + 125)] == [
        "0 ms", "250 ms", "4.2 s", "1 min 1 s", "3 h 2 min",
    ]  # fmt: skip


def test_minutes_read_as_hours_and_minutes() -> None:
    cases = {0: "0 min", 1: "1 min", 2: "2 min", 59: "59 min", 60: "1 h", 61: "1 h 1 min",
             1438: "23 h 58 min", 1440: "1 d", 1505: "1 d 1 h 5 min",
             2 * 1440 + 180: "2 d 3 h"}  # fmt: skip
    assert {m: minutes_text(m) for m in cases} == cases
    assert human_duration(2 * 3600) == "2 h"  # not "2 h 0 min"


def test_an_admin_override_reads_as_the_approvals_it_cut_short() -> None:
    """Issue 31: an admin's override on a 2-of-2 quorum with one approval read "2 of 2"."""
    journal = [
        _entry(1, JournalEvent.TAKEOVER_REQUESTED, "approve", 0, requestId="tk-1"),
        _entry(2, JournalEvent.TAKEOVER_GRANTED, "approve", 10, requestId="tk-1", by="bob",
               approvals=1, approvalsRequired=2, final=False),
        _entry(3, JournalEvent.TAKEOVER_GRANTED, "approve", 20, requestId="tk-1", by="alice",
               approvals=2, approvalsRequired=2, final=True, override="admin"),
    ]  # fmt: skip
    labels = [i.label for i in TimelineReader().read(journal)]
    assert labels[1:] == [
        "Granted by bob (1 of 2)",
        "Granted: 1 of 2, decided by alice's admin override",
    ]
