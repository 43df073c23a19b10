"""A run's journal read as a timeline: what happened, when, how long it took, who decided.

The console's run page shows it, and its live stream extends it one journal entry at a time, so
the reading is incremental (``TimelineReader.read``): a completion needs the time its step
started, a decision the time its request was made, both seen in earlier entries. Values are raw
text; escaping belongs to whoever renders them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.domain.model import JournalEntry, JournalEvent, RunStatus
from engine.domain.quorum import toward_quorum
from engine.domain.verdicts import GateVerdict

RUN_ENDS = {
    JournalEvent.RUN_COMPLETED: RunStatus.COMPLETED,
    JournalEvent.RUN_FAILED: RunStatus.FAILED,
    JournalEvent.RUN_CANCELLED: RunStatus.CANCELLED,
}
_DECISIONS = {
    JournalEvent.TAKEOVER_GRANTED,
    JournalEvent.TAKEOVER_DENIED,
    JournalEvent.TAKEOVER_EXPIRED,
    JournalEvent.TAKEOVER_CANCELLED,
}
_DETAIL_LIMIT = 500


@dataclass(frozen=True, slots=True)
class TimelineItem:
    """One journal entry as a person reads it."""

    seq: int
    at: datetime
    event: JournalEvent
    step_id: str | None
    label: str  # e.g. "Step refund completed", "Granted by bob (1 of 2)"
    tone: str  # "info" | "ok" | "wait" | "bad": how the page colours it
    actor: str | None = None  # who started, decided or cancelled
    detail: str | None = None  # a reason, notes, an error, a rule (raw text)
    duration_seconds: float | None = None  # step: since it started; decision: since requested
    score: float | None = None  # confidence gate
    threshold: float | None = None
    request_id: str | None = None  # the takeover request the entry is about

    @property
    def duration(self) -> str | None:
        """The duration as a person writes it: "850 ms", "4.2 s", "3 min 5 s", "2 h 10 min"."""
        return None if self.duration_seconds is None else human_duration(self.duration_seconds)


def human_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return minutes_text(whole // 60)


def minutes_text(minutes: int) -> str:
    """Whole minutes as a person writes them: "1 min", "59 min", "1 h", "23 h 58 min",
    "2 d 3 h". The one spelling of a wait or a countdown on every page, card and notice
    (``bot/static/approval.js`` counts down in the same words)."""
    minutes = max(0, int(minutes))
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days} d" + (f" {hours} h" if hours else "") + (f" {mins} min" if mins else "")
    if hours:
        return f"{hours} h" + (f" {mins} min" if mins else "")
    return f"{mins} min"


Make = Callable[..., TimelineItem]


class TimelineReader:
    """Turns journal entries into timeline items, remembering what later entries refer to."""

    def __init__(self) -> None:
        self.last_seq = 0
        self.run_started: datetime | None = None
        self.step_started: dict[str, datetime] = {}
        self.requested: dict[str, datetime] = {}

    def read(self, entries: Iterable[JournalEntry]) -> list[TimelineItem]:
        items = []
        for entry in entries:
            if entry.seq <= self.last_seq:
                continue  # already read (a stream that resumed)
            self.last_seq = entry.seq
            items.append(self._item(entry))
        return items

    def _item(self, e: JournalEntry) -> TimelineItem:
        d: dict[str, Any] = e.data if isinstance(e.data, dict) else {}
        request_id = _text(d.get("requestId"))
        step = e.step_id or "?"
        by = _text(d.get("by"))
        ev = JournalEvent
        item = TimelineItem(e.seq, e.at, e.event, e.step_id, e.event.value, "info")

        def make(label: str, tone: str = "info", **kw: Any) -> TimelineItem:
            fields = {"request_id": request_id, **kw}
            return TimelineItem(e.seq, e.at, e.event, e.step_id, label, tone, **fields)

        if e.event == ev.RUN_STARTED:
            self.run_started = e.at
            agent, starter = _text(d.get("agent")), _text(d.get("requestedBy"))
            item = make(
                f"Run of {_text(d.get('workflow')) or 'a workflow'} started",
                actor=starter,
                detail=f"agent {agent}" if agent and agent != starter else None,
            )
        elif e.event == ev.STEP_STARTED:
            self.step_started.setdefault(step, e.at)
            kind = _text(d.get("nodeType"))
            item = make(f"Step {step} started" + (f" ({kind})" if kind else ""))
        elif e.event == ev.STEP_COMPLETED:
            item = make(
                f"Step {step} completed",
                "ok",
                detail=_brief(d.get("output")),
                duration_seconds=self._since(self.step_started.get(step), e.at),
            )
        elif e.event == ev.STEP_FAILED:
            final = bool(d.get("final"))
            item = make(
                f"Step {step} failed" + ("" if final else " (will retry)"),
                "bad",
                detail=_text(d.get("error")),
                duration_seconds=self._since(self.step_started.get(step), e.at),
            )
        elif e.event == ev.CONFIDENCE_EVALUATED:
            score, threshold = _number(d.get("score")), _number(d.get("threshold"))
            decision = _text(d.get("decision"))
            shown = "?" if score is None else f"{score:.2f}"
            item = make(
                f"Confidence {shown}" + (f": {decision}" if decision else ""),
                "wait" if decision == GateVerdict.DIVERT else "info",
                detail=_text(d.get("estimator")),
                score=score,
                threshold=threshold,
            )
        elif e.event == ev.POLICY_EVALUATED:
            item = make(
                f"Policy: {_text(d.get('decision')) or 'evaluated'}",
                detail=_text(d.get("rule")),
            )
        elif e.event == ev.TAKEOVER_REQUESTED:
            if request_id:
                self.requested[request_id] = e.at
            item = make("Approval requested", "wait", detail=_text(d.get("reason")))
        elif e.event == ev.TAKEOVER_DELEGATED:  # engine.domain.delegation.delegation_events
            said = [
                f"{x.get('delegate')} decides for {x.get('for')}, away until {_until(x)}"
                for x in d.get("delegates") or ()
                if isinstance(x, dict)
            ]
            item = make("Asked a delegate too", "info", detail="; ".join(said) or None)
        elif e.event in _DECISIONS:
            item = self._decision(e, d, request_id, by, make)
        elif e.event == ev.TAKEOVER_RELEASED:
            item = make(f"Released by {by}" if by else "Released", "ok", actor=by)
        elif e.event == ev.RUN_WAITING:
            child = _text(d.get("childRunId"))
            item = make(
                "Run waiting for a child run" if child else "Run waiting for a decision",
                "wait",
                detail=child,
            )
        elif e.event == ev.RUN_RESUMED:
            item = make("Run resumed")
        elif e.event in RUN_ENDS:
            tone = "ok" if e.event == ev.RUN_COMPLETED else "bad"
            item = make(
                f"Run {RUN_ENDS[e.event].value}",
                tone,
                actor=by,
                detail=_text(d.get("error")) or _brief(d.get("output")),
                duration_seconds=self._since(self.run_started, e.at),
            )
        elif e.event == ev.FEEDBACK_RECORDED:
            item = make(f"Feedback {_text(d.get('score')) or ''}".strip(), actor=by)
        return item

    def _decision(
        self, e: JournalEntry, d: dict[str, Any], request_id: str | None, by: str | None, make: Make
    ) -> TimelineItem:
        waited = self._since(self.requested.get(request_id or ""), e.at)
        notes = _text(d.get("notes"))
        if e.event == JournalEvent.TAKEOVER_GRANTED:
            approvals, required = d.get("approvals"), d.get("approvalsRequired")
            quorum = f" ({approvals} of {required})" if required not in (None, 1) else ""
            tone = "ok" if d.get("final", True) else "wait"
            label = f"Granted by {by}{quorum}" if by else "Granted"
            override = _text(d.get("override"))
            if by and override and isinstance(approvals, int) and isinstance(required, int):
                counted = f"{toward_quorum(approvals, True)} of {required}, decided by"
                label = f"Granted: {counted} {by}'s {override} override"
            return make(label, tone, actor=by, detail=notes, duration_seconds=waited)
        if e.event == JournalEvent.TAKEOVER_DENIED:
            label = f"Denied by {by}" if by else "Denied"
            return make(label, "bad", actor=by, detail=notes, duration_seconds=waited)
        if e.event == JournalEvent.TAKEOVER_EXPIRED:
            behavior = _text(d.get("behavior"))
            label = "Approval expired" + (f" ({behavior})" if behavior else "")
            return make(label, "bad", duration_seconds=waited)
        return make("Approval cancelled", "bad", duration_seconds=waited)

    @staticmethod
    def _since(start: datetime | None, end: datetime) -> float | None:
        if start is None:
            return None
        return max(0.0, (end - start).total_seconds())


def _until(entry: dict[str, Any]) -> str:
    """An absence's end as a person reads it (``2026-12-24 00:00 UTC``), else as written."""
    written = str(entry.get("until"))
    try:
        return datetime.fromisoformat(written).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return written


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _brief(value: Any) -> str | None:
    """A short account of a step's output (the run page links to the whole journal)."""
    text = _text(value)
    if text is None or len(text) <= _DETAIL_LIMIT:
        return text
    return text[:_DETAIL_LIMIT] + f"… ({len(text) - _DETAIL_LIMIT} more characters)"
