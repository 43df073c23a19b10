"""``ConfidenceGate.assess`` on a real database: what is gated, threshold edges, routing of a
diversion, failures, calibration from journal history, and feedback."""

from __future__ import annotations

import itertools

import pytest

from engine.adapters.llm import OpenAICompatibleSampler
from engine.adapters.store import Database, SqlStore
from engine.config.sections import GateConfig
from engine.domain.errors import InvalidRequest, NotFound
from engine.domain.model import JournalEvent, NewEvent, RunStatus
from engine.domain.records import NewRun
from engine.gate import ConfidenceGate, GateSettings
from engine.ports import GateQuestion
from tests.fakes.llm import FakeLlm, Reply
from tests.support.clock import ManualClock

ON = {"SIGNOFF_CONFIDENCE_GATE": "1", "SIGNOFF_CONFIDENCE_ESTIMATOR": "verbalization"}


@pytest.fixture
def store(database):
    return SqlStore(database)


@pytest.fixture
def clock():
    return ManualClock()


def make_gate(store, clock, env=None, config=None, sampler=None, **kw):
    settings = GateSettings(config or GateConfig(), {**ON, **(env or {})}, store, clock)
    return ConfidenceGate(settings, store, clock, sampler=sampler, **kw)


def question(said: str | None = None, **kw) -> GateQuestion:
    fields = {
        "run_id": "run-x",
        "workflow": "refund-demo",
        "agent": "billing-bot",
        "step_id": "refund",
        "node_type": "connector",
        "connector": "demo-ledger",
        "action": "refund",
        "args": {"order": "A-17", "amount": 420},
        "prior_outputs": {"plan": said} if said else {},
        "requires_confidence": False,
        "channels": ("web",),
        "approvers": ("bob",),
    }
    return GateQuestion(**{**fields, **kw})


async def test_off_means_not_gated(store, clock):
    gate = make_gate(store, clock, {"SIGNOFF_CONFIDENCE_GATE": "off"})
    assert await gate.assess(question("Confidence: 10%")) is None


@pytest.mark.parametrize(
    ("node_type", "requires", "gated"),
    [
        ("connector", False, True),
        ("tool", False, True),
        ("ai-step", False, False),
        ("ai-step", True, True),
        ("approval", False, False),
        ("workflow", False, False),
    ],
)
async def test_what_is_gated(store, clock, node_type, requires, gated):
    gate = make_gate(store, clock)
    found = await gate.assess(question(node_type=node_type, requires_confidence=requires))
    assert (found is not None) is gated


@pytest.mark.parametrize(
    ("said", "decision"),
    [("Confidence: 75%", "execute"), ("Confidence: 74%", "divert"), ("Confidence: 76%", "execute")],
)
async def test_threshold_edges(store, clock, said, decision):
    gate = make_gate(store, clock, {"SIGNOFF_CONFIDENCE_GATE_THRESHOLD": "0.75"})
    found = await gate.assess(question(said))
    assert found["decision"] == decision  # a score equal to the threshold executes
    assert found["threshold"] == 0.75 and found["node_type"] == "connector"
    assert found["estimator"] == "verbalization"


async def test_threshold_zero_and_one(store, clock):
    never = make_gate(store, clock, {"SIGNOFF_CONFIDENCE_GATE_THRESHOLD": "0"})
    assert (await never.assess(question("Confidence: 0%")))["decision"] == "execute"
    always = make_gate(store, clock, {"SIGNOFF_CONFIDENCE_GATE_THRESHOLD": "1"})
    assert (await always.assess(question("Confidence: 100%")))["decision"] == "execute"
    assert (await always.assess(question("Confidence: 99%")))["decision"] == "divert"


async def test_a_diversion_goes_to_the_steps_channels_else_the_gates(store, clock):
    config = GateConfig(channels=("slack:C0GATE",), approvers=("finance",))
    gate = make_gate(store, clock, config=config)
    own = await gate.assess(question("Confidence: 20%"))
    assert own["decision"] == "divert"
    assert own["channels"] == ["web"] and own["approvers"] == ["bob"]
    fallback = await gate.assess(question("Confidence: 20%", channels=(), approvers=()))
    assert fallback["channels"] == ["slack:C0GATE"] and fallback["approvers"] == ["finance"]
    assert fallback["score"] == 0.2 and fallback["detail"] == "step plan reported 20% confidence"


async def test_no_approval_channel_auto_approves_and_says_why(store, clock):
    gate = make_gate(store, clock)
    found = await gate.assess(question("Confidence: 20%", channels=()))
    assert found["decision"] == "execute" and found["score"] == 0.2
    assert "no approval channel" in found["auto_approved"]
    assert "channels" not in found


async def test_a_failed_llm_diverts_whatever_the_threshold(store, clock):
    async with FakeLlm() as llm:
        llm.default = Reply("down", status=503)
        sampler = OpenAICompatibleSampler(llm.base_url, "fake-model", max_retries=0)
        env = {
            "SIGNOFF_CONFIDENCE_ESTIMATOR": "self-consistency",
            "SIGNOFF_CONFIDENCE_GATE_THRESHOLD": "0",
        }
        try:
            found = await make_gate(store, clock, env, sampler=sampler).assess(question())
        finally:
            await sampler.close()
    assert found["decision"] == "divert" and found["score"] == 0.0
    assert "every LLM sample failed" in found["error"] and found["votes"] == [False] * 5


async def test_self_consistency_journal_data(store, clock):
    async with FakeLlm() as llm:
        llm.script("YES", "NO", "YES", "NO", "YES")
        sampler = OpenAICompatibleSampler(llm.base_url, "fake-model")
        env = {"SIGNOFF_CONFIDENCE_ESTIMATOR": "self-consistency"}
        try:
            found = await make_gate(store, clock, env, sampler=sampler).assess(question())
        finally:
            await sampler.close()
    assert found["score"] == 0.6 and found["decision"] == "divert"
    assert found["estimator"] == "self-consistency" and found["samples"] == 5
    assert sorted(found["votes"]) == [False, False, True, True, True]
    assert found["detail"] == "3 of 5 samples said execute"


async def test_without_an_llm_the_journal_says_it_fell_back(store, clock):
    gate = make_gate(store, clock, {"SIGNOFF_CONFIDENCE_ESTIMATOR": "self-consistency"})
    found = await gate.assess(question("Confidence: 95%"))
    assert found["estimator"] == "verbalization" and found["score"] == 0.95
    assert "no LLM is configured" in found["fallback"]


class Exploding:
    """An estimator that fails outright (a bug, not an LLM outage)."""

    name = "verbalization"

    async def estimate(self, question, samples):
        raise RuntimeError("boom")


async def test_a_gate_error_diverts(store, clock):
    gate = make_gate(store, clock, estimators={"verbalization": Exploding()})
    found = await gate.assess(question())
    assert found["decision"] == "divert" and found["score"] == 0.0
    assert found["error"] == "RuntimeError: boom" and found["channels"] == ["web"]


# -- calibration -----------------------------------------------------------------------------

_ids = itertools.count(1)


async def executed_step(
    store,
    clock,
    *,
    agent="billing-bot",
    node_type="connector",
    status=RunStatus.COMPLETED,
    decision="execute",
    feedback=(),
    completed=True,
):
    """A run in which the gate scored one step and (by default) let it run."""
    run_id = f"hist-{next(_ids):05d}"
    events = [
        NewEvent(JournalEvent.STEP_STARTED, "act", {"nodeType": node_type}),
        NewEvent(
            JournalEvent.CONFIDENCE_EVALUATED,
            "act",
            {
                "score": 0.9,
                "threshold": 0.75,
                "decision": decision,
                "node_type": node_type,
                "estimator": "verbalization",
            },
        ),
    ]
    if completed:
        events.append(NewEvent(JournalEvent.STEP_COMPLETED, "act", {"output": {}}))
    await store.create_run(
        NewRun(id=run_id, workflow="wf", input={}, agent=agent, status=status),
        clock.now(),
        events,
    )
    for score in feedback:
        await store.append_feedback(run_id, "act", score, None, "bob", clock.now())
    return run_id


CALIBRATE = {"SIGNOFF_CONFIDENCE_CALIBRATE": "1"}


@pytest.mark.parametrize(
    ("good", "rated_bad", "failed", "score", "regret"),
    [
        (0, 0, 0, 0.8, None),  # no history
        (0, 2, 0, 0.8, 1.0),  # 2 samples, both bad: too few, the base score stands
        (2, 1, 0, 0.5333, 0.3333),  # 3 samples, 1 bad
        (40, 5, 5, 0.64, 0.2),  # 50 samples: 5 rated <= 2, 5 in failed runs
    ],
)
async def test_calibration(store, clock, good, rated_bad, failed, score, regret):
    for i in range(good):
        await executed_step(store, clock, feedback=[3 + i % 3] if i % 2 else [])
    for i in range(rated_bad):
        await executed_step(store, clock, feedback=[1 + i % 2])  # 1 and 2 are both regret
    for _ in range(failed):
        await executed_step(store, clock, status=RunStatus.FAILED)
    found = await make_gate(store, clock, CALIBRATE).assess(question("Confidence: 80%"))
    samples = good + rated_bad + failed
    assert found["base_score"] == 0.8
    assert found["score"] == score
    assert found["regret_samples"] == samples
    if regret is None:
        assert found["regret"] == 0.0
    else:
        assert found["regret"] == regret
    if samples < 3:
        assert "fewer than 3" in found["calibration"]


async def test_calibration_counts_only_known_outcomes_of_this_agent_and_node_type(store, clock):
    for _ in range(3):
        await executed_step(store, clock, feedback=[1])  # counted: 3 regretted samples
    await executed_step(store, clock, status=RunStatus.RUNNING)  # outcome unknown yet
    await executed_step(store, clock, decision="divert", feedback=[1])  # a person decided
    await executed_step(store, clock, completed=False, status=RunStatus.FAILED)  # never ran
    await executed_step(store, clock, agent="other-bot", feedback=[5])
    await executed_step(store, clock, node_type="tool", feedback=[5])
    await executed_step(store, clock, feedback=[1, 4])  # the latest rating counts: good
    found = await make_gate(store, clock, CALIBRATE).assess(question("Confidence: 80%"))
    assert found["regret_samples"] == 4 and found["regret"] == 0.75
    assert found["score"] == 0.2


async def test_feedback_clears_the_calibration_cache(store, clock):
    gate = make_gate(store, clock, CALIBRATE)
    runs = [await executed_step(store, clock) for _ in range(4)]
    assert (await gate.assess(question("Confidence: 80%")))["score"] == 0.8
    await gate.record_feedback(runs[0], "act", 1, "wrong customer", "bob")
    found = await gate.assess(question("Confidence: 80%"))
    assert found["regret"] == 0.25 and found["score"] == 0.6


async def test_a_calibration_error_keeps_the_base_score(sqlite_url, clock):
    unmigrated = Database(sqlite_url)  # no tables: every query fails
    try:
        store = SqlStore(unmigrated)
        found = await make_gate(store, clock, CALIBRATE).assess(question("Confidence: 80%"))
    finally:
        await unmigrated.dispose()
    assert found["score"] == 0.8 and found["base_score"] == 0.8
    assert found["calibration"].startswith("skipped")


# -- feedback --------------------------------------------------------------------------------


async def test_feedback_is_journaled_on_finished_runs(store, clock):
    gate = make_gate(store, clock)
    run_id = await executed_step(store, clock, status=RunStatus.COMPLETED)
    entry = await gate.record_feedback(run_id, "act", 2, "late", "carol")
    assert entry.event == JournalEvent.FEEDBACK_RECORDED and entry.step_id == "act"
    assert entry.data == {"score": 2, "comment": "late", "by": "carol"}
    journal = await store.journal(run_id)
    assert journal[-1].seq == entry.seq and journal[-1].data == entry.data
    assert (await store.get_run(run_id)).status == RunStatus.COMPLETED

    with pytest.raises(NotFound, match="not found"):
        await gate.record_feedback("no-such-run", "act", 5, None, "carol")
    with pytest.raises(NotFound, match="has no step 'nope'"):
        await gate.record_feedback(run_id, "nope", 5, None, "carol")
    for bad in (0, 6, True, 2.5):
        with pytest.raises(InvalidRequest):
            await gate.record_feedback(run_id, "act", bad, None, "carol")
