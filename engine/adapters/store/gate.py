"""What the confidence gate needs from the database: the outcomes of the steps it let through
(for calibration), feedback on steps, and its runtime overrides written as one audited change.

Calibration reads the journal itself rather than a table of its own: a step the gate
auto-executed is a ``confidence_evaluated`` event with ``decision: execute`` followed by that
step's ``step_completed``; its outcome is the latest ``feedback_recorded`` score on the step and
the status of its run. Nothing has to be kept in sync, and replays cannot double-count.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, insert, or_, select
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase
from engine.adapters.store.journal import append_journal
from engine.adapters.store.statuses import status_in
from engine.domain.errors import NotFound
from engine.domain.model import (
    TERMINAL_RUN_STATUSES,
    JournalEntry,
    JournalEvent,
    NewEvent,
    RunStatus,
)
from engine.domain.records import GatedOutcome
from engine.domain.verdicts import GateVerdict


class GateStore(StoreBase):
    async def gated_outcomes(
        self, agent: str | None, node_type: str, *, limit: int = 200
    ) -> list[GatedOutcome]:
        """The ``limit`` most recent steps of ``node_type`` in runs of ``agent`` (None: runs
        without an agent) that the gate auto-executed and whose outcome is known: the step has
        feedback, or its run has ended. A step whose run is still going and that nobody has
        rated yet says nothing either way, so it is left out."""

        def work(conn: Connection) -> list[GatedOutcome]:
            ce, done, fb = t.journal.alias("ce"), t.journal.alias("done"), t.journal.alias("fb")
            same_step = (fb.c.run_id == ce.c.run_id, fb.c.step_id == ce.c.step_id)
            is_feedback = fb.c.event == JournalEvent.FEEDBACK_RECORDED.value
            latest = (
                select(fb.c.data["score"].as_integer())
                .where(*same_step, is_feedback)
                .order_by(fb.c.seq.desc())
                .limit(1)
                .scalar_subquery()
            )
            completed = exists().where(
                done.c.run_id == ce.c.run_id,
                done.c.step_id == ce.c.step_id,
                done.c.event == JournalEvent.STEP_COMPLETED.value,
                done.c.seq > ce.c.seq,
            )
            rated = exists().where(*same_step, is_feedback)
            runs = t.runs
            q = (
                select(ce.c.run_id, ce.c.step_id, ce.c.at, runs.c.status, latest.label("score"))
                .join(runs, runs.c.id == ce.c.run_id)
                .where(
                    ce.c.event == JournalEvent.CONFIDENCE_EVALUATED.value,
                    ce.c.data["decision"].as_string() == GateVerdict.EXECUTE.value,
                    ce.c.data["node_type"].as_string() == node_type,
                    runs.c.agent.is_(None) if agent is None else runs.c.agent == agent,
                    completed,
                    or_(status_in(runs.c.status, TERMINAL_RUN_STATUSES), rated),
                )
                .order_by(ce.c.at.desc(), ce.c.run_id, ce.c.seq)
                .limit(limit)
            )
            return [
                GatedOutcome(
                    run_id=row.run_id,
                    step_id=row.step_id,
                    run_status=RunStatus(row.status),
                    feedback=None if row.score is None else int(row.score),
                    at=row.at,
                )
                for row in conn.execute(q)
            ]

        return await self.db.transact(work, write=False)

    async def append_feedback(
        self,
        run_id: str,
        step_id: str,
        score: int,
        comment: str | None,
        who: str,
        now: datetime,
    ) -> JournalEntry:
        """Journal ``feedback_recorded`` on a step of a run, whatever the run's status (feedback
        usually comes after it has finished, so there is no lease fence). ``NotFound`` when the
        run does not exist or never started that step."""

        def work(conn: Connection) -> JournalEntry:
            started = conn.execute(
                select(t.journal.c.seq)
                .where(
                    t.journal.c.run_id == run_id,
                    t.journal.c.step_id == step_id,
                    t.journal.c.event == JournalEvent.STEP_STARTED.value,
                )
                .limit(1)
            )
            if started.first() is None:
                known = conn.execute(select(t.runs.c.id).where(t.runs.c.id == run_id))
                if known.first() is None:
                    raise NotFound(f"run {run_id} not found", run_id=run_id)
                raise NotFound(f"run {run_id} has no step {step_id!r}", run_id=run_id)
            data = {"score": score, "comment": comment, "by": who}
            event = NewEvent(JournalEvent.FEEDBACK_RECORDED, step_id, data)
            seq = append_journal(conn, run_id, [event], now)
            return JournalEntry(run_id, seq, event.event, step_id, data, now)

        return await self.db.transact(work)

    async def set_gate_overrides(
        self,
        scope: str,
        scope_key: str,
        values: Mapping[str, Any],
        actor: str,
        now: datetime,
    ) -> dict[str, Any]:
        """Set (a ``None`` value: remove) several overrides at one scope in one transaction,
        each change audited (``gate.set``: who, when, old, new). A value equal to the stored
        one is left alone. Returns ``{setting: old value}`` for the settings that changed."""

        def work(conn: Connection) -> dict[str, Any]:
            go = t.gate_overrides
            changed: dict[str, Any] = {}
            for setting, value in values.items():
                key = (go.c.scope == scope, go.c.scope_key == scope_key, go.c.setting == setting)
                old = (conn.execute(select(go.c.value).where(*key))).scalar_one_or_none()
                if old == value and type(old) is type(value):
                    continue
                conn.execute(delete(go).where(*key))
                if value is not None:
                    conn.execute(
                        insert(go).values(
                            scope=scope,
                            scope_key=scope_key,
                            setting=setting,
                            value=value,
                            updated_by=actor,
                            updated_at=now,
                        )
                    )
                target = f"gate.{setting}" + (f"[{scope}={scope_key}]" if scope_key else "")
                conn.execute(
                    insert(t.audit_log).values(
                        at=now, actor=actor, action="gate.set", target=target, old=old, new=value
                    )
                )
                changed[setting] = old
            return changed

        return await self.db.transact(work)
