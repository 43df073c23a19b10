"""Golden journals: parked runs recorded once, committed under ``tests/journals/``, replayed by
the current interpreter in ``tests/integration/test_golden_journals.py``.

A file holds the rows a parked run left behind: the run row, its journal, its takeover requests
(with their votes), for the run and any child run it waits on. ``load`` writes them into an
empty, migrated database exactly as recorded; nothing is re-derived.

``GOLDEN_WORKFLOWS`` is the *current* graph of each recorded workflow. Changing a workflow here
without re-recording must make its golden file fail with the nondeterminism error; that is the
point. To re-record (on purpose, after an intended change to the journal format):

    python -m tests.support.golden
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import textwrap
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select

from engine.adapters.store import SqlStore
from engine.adapters.store import tables as t
from engine.adapters.store.migrate import upgrade_to_head
from engine.adapters.store.tables import UTCDateTime
from engine.assembly import Engine, EngineOptions
from engine.config import parse_config
from engine.domain.model import Principal, Role, RunStatus
from engine.ports import ChatMessage
from engine.services.calls import CallRequest
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, PEOPLE, person, wait_for, wait_status
from tests.support.ids import SequentialIds

JOURNALS = Path(__file__).resolve().parents[1] / "journals"
FORMAT = 1

GOLDEN_WORKFLOWS = """
golden-refund:
  nodes:
    - {id: lookup, type: connector, connector: demo-ledger, action: lookup,
       args: {order: "{{ input.order }}"}}
    - {id: approve, type: approval, reason: "Refund {{ input.amount }} for {{ input.order }}",
       approvers: [finance], channels: [web], onDeny: denied}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}, next: end}
    - {id: denied, type: connector, connector: demo-ledger, action: note,
       args: {text: "refund refused"}}
golden-two-approvals:
  nodes:
    - {id: lookup, type: connector, connector: demo-ledger, action: lookup,
       args: {order: "{{ input.order }}"}}
    - {id: manager, type: approval, reason: "Manager: refund {{ input.order }}",
       approvers: [finance]}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ steps.lookup.output.amount }}"}}
    - {id: audit, type: approval, reason: "Audit the refund of {{ input.order }}",
       approvers: [finance]}
golden-child:
  nodes:
    - {id: approve, type: approval, reason: "Child step for {{ input.order }}",
       approvers: [finance]}
    - {id: act, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
golden-override:
  nodes:
    - {id: approve, type: approval, reason: "Carol decides {{ input.order }}", approvers: [carol]}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
    - {id: audit, type: approval, reason: "Carol audits {{ input.order }}", approvers: [carol]}
golden-takeover:
  nodes:
    - {id: prepare, type: connector, connector: demo-ledger, action: note,
       args: {text: "about to refund {{ input.order }}"}}
    - {id: act, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
golden-gated:
  nodes:
    - {id: lookup, type: connector, connector: demo-ledger, action: lookup,
       args: {order: "{{ input.order }}"}}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}}
golden-parent:
  nodes:
    - {id: prepare, type: connector, connector: demo-ledger, action: note,
       args: {text: "parent of {{ input.order }}"}}
    - {id: child, type: workflow, workflow: golden-child, args: {order: "{{ input.order }}"}}
    - {id: finish, type: connector, connector: demo-ledger, action: note,
       args: {text: "child said {{ steps.child.output.output.action }}"}}
"""


# Sections only some recordings need: a policy that holds calls, a gate that diverts.
CALLS_CONFIG = """
approvals: {ttl: 2h}
connectors:
  demo-ledger:
    type: demo-ledger
    actions:
      lookup: {kind: read}
      refund: {kind: write, summary: "Refund {{ args.amount }} EUR for order {{ args.order }}"}
      note: {kind: write}
policies:
  - {name: refunds, decision: ask, connector: demo-ledger, action: refund,
     approvers: [finance], channels: [web]}
"""
GATE_CONFIG = "gate: {enabled: true, channels: [web], approvers: [finance]}\n"


def golden_config_text(db_url: str, extra: str = "") -> str:
    return (
        f"database: {{url: '{db_url}'}}\n"
        "server: {workers: 4, leaseSeconds: 30, pollSeconds: 0.05}\n"
        + PEOPLE
        + textwrap.dedent(extra)
        + "workflows:\n"
        + textwrap.indent(textwrap.dedent(GOLDEN_WORKFLOWS), "  ")
    )


# -- dump and load --------------------------------------------------------------------------------


def _plain(row: Any) -> dict[str, Any]:
    return {
        key: value.isoformat() if isinstance(value, datetime) else value
        for key, value in dict(row).items()
    }


def _typed(table: Any, row: dict[str, Any]) -> dict[str, Any]:
    """A row as read from JSON: times back to datetimes, per the table's column types."""
    out = dict(row)
    for column in table.columns:
        value = out.get(column.name)
        if isinstance(column.type, UTCDateTime) and isinstance(value, str):
            out[column.name] = datetime.fromisoformat(value)
    return out


async def dump(store: SqlStore, run_ids: list[str]) -> list[dict[str, Any]]:
    """The rows of ``run_ids`` (parents before children), as JSON-able dicts."""

    async def work(conn: Any) -> list[dict[str, Any]]:
        out = []
        for run_id in run_ids:
            run = (await conn.execute(select(t.runs).where(t.runs.c.id == run_id))).mappings()
            requests = (
                await conn.execute(
                    select(t.takeover_requests)
                    .where(t.takeover_requests.c.run_id == run_id)
                    .order_by(t.takeover_requests.c.created_at)
                )
            ).mappings()
            takeovers = []
            for request in requests:
                votes = (
                    await conn.execute(
                        select(t.takeover_votes)
                        .where(t.takeover_votes.c.request_id == request["id"])
                        .order_by(t.takeover_votes.c.at)
                    )
                ).mappings()
                takeovers.append({**_plain(request), "votes": [_plain(v) for v in votes]})
            out.append({"run": _plain(run.one()), "journal": [], "takeovers": takeovers})
        return out

    runs = await store.db.transact(work, write=False)
    for entry in runs:
        entry["journal"] = [
            {
                "seq": e.seq,
                "event": e.event.value,
                "stepId": e.step_id,
                "data": e.data,
                "at": e.at.isoformat(),
            }
            for e in await store.journal(entry["run"]["id"])
        ]
    return runs


async def load(store: SqlStore, golden: dict[str, Any]) -> None:
    """Write a golden file's rows into an empty, migrated database, exactly as recorded."""
    assert golden["format"] == FORMAT, f"unknown golden format {golden['format']}"

    async def work(conn: Any) -> None:
        for entry in golden["runs"]:
            await conn.execute(insert(t.runs).values(_typed(t.runs, entry["run"])))
            journal = [
                {
                    "run_id": entry["run"]["id"],
                    "seq": e["seq"],
                    "step_id": e["stepId"],
                    "event": e["event"],
                    "data": e["data"],
                    "at": datetime.fromisoformat(e["at"]),
                }
                for e in entry["journal"]
            ]
            if journal:
                await conn.execute(insert(t.journal), journal)
            for request in entry["takeovers"]:
                row = {k: v for k, v in request.items() if k != "votes"}
                await conn.execute(
                    insert(t.takeover_requests).values(_typed(t.takeover_requests, row))
                )
                for vote in request["votes"]:
                    await conn.execute(
                        insert(t.takeover_votes).values(_typed(t.takeover_votes, vote))
                    )

    await store.db.transact(work)


def read(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((JOURNALS / name).read_text(encoding="utf-8"))
    return data


# -- recording ------------------------------------------------------------------------------------

Scenario = Callable[[Engine], Awaitable[list[str]]]


async def _parked_at_approval(engine: Engine) -> list[str]:
    run, _ = await engine.runs.start_run("golden-refund", {"order": "A-1", "amount": 42}, AGENT)
    await wait_status(engine, run.id, RunStatus.WAITING)
    return [run.id]


async def _parked_at_second_approval(engine: Engine) -> list[str]:
    return await _first_approved(engine, "golden-two-approvals", "B-2", 2, person("bob"), "fine")


async def _first_approved(
    engine: Engine, workflow: str, order: str, minutes: int, by: Principal, notes: str
) -> list[str]:
    """Start ``workflow``; ``minutes`` after it parks, ``by`` approves its first request;
    return once the run has parked again, at its second."""
    run, _ = await engine.runs.start_run(workflow, {"order": order}, AGENT)
    await wait_status(engine, run.id, RunStatus.WAITING)
    (first,) = await engine.store.list_takeovers(run_id=run.id)
    engine.clock.advance(minutes=minutes)  # type: ignore[attr-defined]
    await engine.approvals.grant(first.id, by, release=True, notes=notes)

    async def parked_again() -> bool:
        return (
            len(await engine.store.list_takeovers(run_id=run.id)) == 2
            and (await engine.store.get_run(run.id)).status == RunStatus.WAITING
        )

    await wait_for(parked_again)
    return [run.id]


async def _parked_child(engine: Engine) -> list[str]:
    parent, _ = await engine.runs.start_run("golden-parent", {"order": "C-3"}, AGENT)

    async def child_parked() -> str | None:
        runs = await engine.store.list_runs(workflow="golden-child")
        if runs and runs[0].status == RunStatus.WAITING:
            return runs[0].id
        return None

    child_id: str = await wait_for(child_parked)
    await wait_status(engine, parent.id, RunStatus.WAITING)
    return [parent.id, child_id]


async def _held_call(engine: Engine) -> list[str]:
    call = CallRequest(
        connector="demo-ledger", action="refund", args={"order": "D-4", "amount": 12}
    )
    view = await engine.calls.submit(call, AGENT)
    assert view.execution_id is not None
    await wait_status(engine, view.execution_id, RunStatus.WAITING)
    return [view.execution_id]


async def _gate_diversion(engine: Engine) -> list[str]:
    run, _ = await engine.runs.start_run("golden-gated", {"order": "E-5", "amount": 420}, AGENT)
    await wait_status(engine, run.id, RunStatus.WAITING)
    return [run.id]


async def _admin_override(engine: Engine) -> list[str]:
    admin = person("alice", Role.ADMIN)  # not among the approvers: an override
    return await _first_approved(engine, "golden-override", "F-6", 1, admin, "carol is away")


async def _operator_takeover(engine: Engine) -> list[str]:
    # Workers not started yet: the run is still queued when the operator takes it over.
    run, _ = await engine.runs.start_run("golden-takeover", {"order": "G-7"}, AGENT)
    admin = person("alice", Role.ADMIN)
    await engine.approvals.request(run.id, admin, reason="let me look", step_id="act")
    await engine.start()
    await wait_status(engine, run.id, RunStatus.WAITING)
    return [run.id]


class ScriptedSampler:
    """The gate's LLM: says YES to the lookup's samples, splits on the refund's."""

    def __init__(self) -> None:
        self.replies = ["YES"] * 5 + ["YES", "NO", "YES", "NO", "YES"]

    async def complete(
        self, messages: list[ChatMessage], *, temperature: float = 1.0, max_tokens: int = 256
    ) -> str:
        return self.replies.pop(0) if self.replies else "YES"


@dataclass(frozen=True, slots=True)
class Setup:
    """What a recording needs beyond the default engine."""

    extra: str = ""  # config sections
    gated: bool = False  # a scripted LLM for the gate
    started: bool = True  # False: the scenario starts the engine itself


SETUPS: dict[str, Setup] = {
    "held_call.json": Setup(extra=CALLS_CONFIG),
    "gate_diversion.json": Setup(extra=GATE_CONFIG, gated=True),
    "operator_takeover.json": Setup(started=False),
}

SCENARIOS: dict[str, tuple[str, Scenario]] = {
    "parked_at_approval.json": (
        "golden-refund parked at its approval node, after the lookup completed",
        _parked_at_approval,
    ),
    "parked_at_second_approval.json": (
        "golden-two-approvals parked at its second approval (no step bound to it), after the "
        "first was approved and the refund completed",
        _parked_at_second_approval,
    ),
    "parked_child.json": (
        "golden-parent waiting on its child run, the child parked at its approval node",
        _parked_child,
    ),
    "held_call.json": (
        "a held call (policy ask on demo-ledger.refund) parked on its policy request",
        _held_call,
    ),
    "gate_diversion.json": (
        "golden-gated parked on a gate diversion of its refund step (3 of 5 samples said execute)",
        _gate_diversion,
    ),
    "admin_override.json": (
        "golden-override parked at its audit, after an admin outside its approvers granted the "
        "first approval as an override",
        _admin_override,
    ),
    "operator_takeover.json": (
        "golden-takeover parked before its act step on an operator's takeover request made while "
        "the run was queued",
        _operator_takeover,
    ),
}


def _broken(
    golden: dict[str, Any], description: str, change: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    broken: dict[str, Any] = json.loads(json.dumps(golden))
    broken["description"] = description
    for entry in broken["runs"][0]["journal"]:
        change(entry)
    return broken


def _rename_lookup(entry: dict[str, Any]) -> None:
    if entry["stepId"] == "lookup":
        entry["stepId"] = "fetch"


def _retype_lookup(entry: dict[str, Any]) -> None:
    if entry["stepId"] == "lookup" and entry["event"] == "step_started":
        entry["data"]["nodeType"] = "tool"


async def record(directory: Path = JOURNALS) -> list[Path]:
    """Run every scenario on a fresh SQLite file and write its golden file."""
    written = []
    recorded: dict[str, dict[str, Any]] = {}
    for name, (description, scenario) in SCENARIOS.items():
        setup = SETUPS.get(name, Setup())
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite+aiosqlite:///{tmp}/golden.db"
            await upgrade_to_head(url)
            engine = Engine(
                parse_config(golden_config_text(url, setup.extra), {}),
                EngineOptions(
                    clock=ManualClock(),
                    ids=SequentialIds("rec"),
                    owner="recorder",
                    sampler=ScriptedSampler() if setup.gated else None,
                ),
            )
            if setup.started:
                await engine.start()
            try:
                run_ids = await scenario(engine)
            finally:
                await engine.workers.stop()
            runs = await dump(engine.store, run_ids)
            await engine.stop()
        recorded[name] = {"format": FORMAT, "description": description, "runs": runs}
    base = recorded["parked_at_approval.json"]
    recorded["broken_renamed_step.json"] = _broken(
        base,
        "parked_at_approval.json with step lookup recorded as fetch: replay must refuse it",
        _rename_lookup,
    )
    recorded["broken_node_type.json"] = _broken(
        base,
        "parked_at_approval.json with step lookup recorded as a tool node: replay must refuse it",
        _retype_lookup,
    )
    directory.mkdir(parents=True, exist_ok=True)
    for name, golden in recorded.items():
        path = directory / name
        path.write_text(json.dumps(golden, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in asyncio.run(record(Path(sys.argv[1]) if len(sys.argv) > 1 else JOURNALS)):
        print(path)
