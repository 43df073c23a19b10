"""Both estimators: verbalization on text, self-consistency against a fake LLM server."""

from __future__ import annotations

import time

import pytest

from engine.adapters.llm import OpenAICompatibleSampler
from engine.gate.estimators import (
    SILENT_SCORE,
    SelfConsistency,
    Verbalization,
    parse_vote,
    reported_confidence,
    yes_no_question,
)
from engine.ports import GateQuestion
from tests.fakes.llm import FakeLlm, Reply


def question(prior: dict | None = None, **kw) -> GateQuestion:
    fields = {
        "run_id": "run-1",
        "workflow": "refund-demo",
        "agent": "billing-bot",
        "step_id": "refund",
        "node_type": "connector",
        "connector": "demo-ledger",
        "action": "refund",
        "args": {"order": "A-17", "amount": 420},
        "prior_outputs": prior or {},
        "requires_confidence": False,
        "channels": ("web",),
        "approvers": (),
    }
    return GateQuestion(**{**fields, **kw})


# -- verbalization ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Confidence: 85%", 0.85),
        ("confidence 0.85", 0.85),
        ("I am 85% confident this is right", 0.85),
        ("CONFIDENCE = 0.6", 0.6),
        ("confidence level is 90 percent", 0.9),
        ('{"confidence": 0.7, "order": "A-1"}', 0.7),
        ("confidence: 85", 0.85),  # a bare number above 1 is a percentage
        ("Confidence: 40%. Later, after checking: confidence 0.95", 0.95),  # the last one wins
        ("no number here, just confidence", None),
        ("I am confident 3 items shipped", None),  # "confident" + a count is not a confidence
        ("confidence: 250%", None),
        ("", None),
    ],
)
def test_reported_confidence(text, expected):
    found = reported_confidence(text)
    assert found == pytest.approx(expected) if expected is not None else found is None


async def test_verbalization_takes_the_most_recent_step():
    prior = {
        "plan": {"text": "Confidence: 95%"},
        "lookup": {"order": "A-17", "status": "paid"},  # no confidence: does not reset it
        "draft": {"text": "Refund it. 60% confident."},
        "format": "done",
    }
    found = await Verbalization().estimate(question(prior), 5)
    assert found.score == pytest.approx(0.6)
    assert found.estimator == "verbalization"
    assert found.detail == "step draft reported 60% confidence"


async def test_verbalization_without_a_report_scores_point_nine():
    found = await Verbalization().estimate(question({"lookup": {"order": "A-17"}}), 5)
    assert found.score == SILENT_SCORE == 0.9
    assert "no step reported" in found.detail


# -- self-consistency ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "vote"),
    [
        ("YES", True),
        ("yes.", True),
        ("**Yes** - the refund matches the lookup", True),
        ("Answer: YES", True),
        ("<think>the amount is high... fine</think>\nYES", True),
        ("NO", False),
        ("No, the amount is wrong", False),
        ("Maybe", None),
        ("", None),
        ("I think yes", None),  # not an answer in the asked form
    ],
)
def test_parse_vote(answer, vote):
    assert parse_vote(answer) is vote


@pytest.fixture
async def llm():
    async with FakeLlm() as server:
        yield server


@pytest.fixture
async def sampler(llm):
    client = OpenAICompatibleSampler(llm.base_url, "fake-model", timeout_seconds=2, max_retries=0)
    yield client
    await client.close()


async def test_unanimous(llm, sampler):
    llm.default = Reply("YES")
    found = await SelfConsistency(sampler).estimate(question(), 5)
    assert found.score == 1.0 and found.votes == (True,) * 5
    assert found.detail == "5 of 5 samples said execute" and found.failed is None
    assert len(llm.requests) == 5


async def test_split(llm, sampler):
    llm.script("YES", "NO", "YES", "NO", "YES")
    found = await SelfConsistency(sampler).estimate(question(), 5)
    assert found.score == pytest.approx(0.6)
    assert sorted(found.votes) == [False, False, True, True, True]
    assert found.detail == "3 of 5 samples said execute"


async def test_garbage_answers_count_as_no(llm, sampler):
    llm.script("YES", "perhaps", "¯\\_(ツ)_/¯", "", "YES")
    found = await SelfConsistency(sampler).estimate(question(), 5)
    assert found.score == pytest.approx(0.4)
    assert found.invalid == 3 and found.failed is None
    assert found.detail == "2 of 5 samples said execute; 3 unclear (counted as no)"


async def test_garbage_bodies_count_as_no(llm, sampler):
    llm.script("YES", Reply(raw="<html>oops</html>"), "YES")
    found = await SelfConsistency(sampler).estimate(question(), 3)
    assert found.score == pytest.approx(2 / 3) and found.errors == 1 and found.failed is None


async def test_slow_samples_time_out_and_fail_the_estimate(llm):
    llm.default = Reply("YES", delay=1.0)
    client = OpenAICompatibleSampler(llm.base_url, "fake-model", timeout_seconds=0.2)
    try:
        started = time.monotonic()
        found = await SelfConsistency(client).estimate(question(), 3)
        elapsed = time.monotonic() - started
    finally:
        await client.close()
    assert found.score == 0.0 and found.errors == 3
    assert found.failed is not None and "no answer within 0.2s" in found.failed
    assert elapsed < 0.9  # one timeout, all samples at once, no retry of a timeout


async def test_one_slow_sample_counts_as_no(llm):
    llm.script("YES", "YES", Reply("YES", delay=1.0))
    client = OpenAICompatibleSampler(llm.base_url, "fake-model", timeout_seconds=0.3)
    try:
        found = await SelfConsistency(client).estimate(question(), 3)
    finally:
        await client.close()
    assert found.score == pytest.approx(2 / 3) and found.errors == 1 and found.failed is None
    assert "1 failed (counted as no)" in found.detail


async def test_failing_server_fails_the_estimate(llm, sampler):
    llm.default = Reply("upstream exploded", status=500)
    found = await SelfConsistency(sampler).estimate(question(), 5)
    assert found.score == 0.0 and found.errors == 5
    assert found.failed is not None and "HTTP 500" in found.failed


async def test_without_an_llm_it_falls_back_to_verbalization():
    found = await SelfConsistency(None).estimate(question({"plan": "Confidence: 70%"}), 5)
    assert found.estimator == "verbalization" and found.score == pytest.approx(0.7)
    assert found.fallback is not None and "no LLM is configured" in found.fallback
    assert found.votes is None


async def test_five_samples_cost_one_round_trip(llm, sampler):
    """The default (5 samples) runs them concurrently: about one delay, not five."""
    llm.default = Reply("YES", delay=0.3)
    started = time.monotonic()
    found = await SelfConsistency(sampler).estimate(question(), 5)
    elapsed = time.monotonic() - started
    assert found.score == 1.0
    assert llm.peak_in_flight == 5
    assert 0.3 <= elapsed < 0.9, elapsed  # sequential would be 1.5 s


async def test_the_question_carries_the_exact_action(llm, sampler):
    llm.default = Reply("NO")
    prior = {"lookup": {"order": "A-17", "paid": 420}}
    await SelfConsistency(sampler).estimate(question(prior), 2)
    first, second = llm.requests
    assert first.body["messages"] == second.body["messages"]  # the same independent question
    prompt = first.prompt
    for needle in (
        "Workflow: refund-demo",
        "Agent: billing-bot",
        "Step: refund (connector)",
        "Connector: demo-ledger",
        "Action: refund",
        '"amount": 420',
        '"order": "A-17"',
        '"paid": 420',
        "YES or NO",
    ):
        assert needle in prompt, needle
    assert first.body["temperature"] == 1.0  # sampled, or the votes would all agree


def test_long_arguments_are_bounded_in_the_prompt():
    messages = yes_no_question(question(args={"blob": "x" * 50_000}))
    assert len(messages[1].content) < 20_000 and "more characters" in messages[1].content
