"""Gate settings on a real database: layers and sources, admins' changes, audit, the cache,
and the chat commands that drive them."""

from __future__ import annotations

import pytest

from engine.adapters.store import SqlStore
from engine.config.sections import GateConfig
from engine.domain.confidence import Estimator
from engine.domain.errors import Forbidden, InvalidRequest
from engine.domain.model import Principal, Role
from engine.gate import ConfidenceGate, GateSettings, Outcome, run_command
from tests.support.clock import ManualClock

ADMIN = Principal(name="alice", role=Role.ADMIN, person="alice")
BOB = Principal(name="bob", role=Role.APPROVER, person="bob")


@pytest.fixture
def store(database):
    return SqlStore(database)


@pytest.fixture
def clock():
    return ManualClock()


def settings(store, clock, config=None, env=None):
    return GateSettings(config or GateConfig(), env or {}, store, clock)


async def test_defaults(store, clock):
    e = await settings(store, clock).effective()
    assert (e.enabled, e.threshold, e.estimator, e.samples, e.calibrate) == (
        False,
        0.75,
        Estimator.SELF_CONSISTENCY,
        5,
        False,
    )
    assert set(e.sources.values()) == {"default"}


async def test_layers_and_sources(store, clock):
    config = GateConfig(enabled=False, threshold=0.6, samples=3, channels=("web",))
    env = {"SIGNOFF_CONFIDENCE_GATE": "on", "SIGNOFF_CONFIDENCE_GATE_THRESHOLD": "0.7"}
    s = settings(store, clock, config, env)
    e = await s.effective()
    assert e.enabled and e.threshold == 0.7 and e.samples == 3 and e.channels == ("web",)
    assert e.sources == {
        "enabled": "env",  # env beats app.yaml
        "threshold": "env",
        "estimator": "default",
        "samples": "app.yaml",
        "calibrate": "default",
    }
    await s.change(ADMIN, {"threshold": 0.8})
    await s.change(ADMIN, {"threshold": 0.85, "samples": 7}, "node_type", "connector")
    await s.change(ADMIN, {"threshold": 0.9}, "agent", "billing-bot")

    e = await s.effective()
    assert (e.threshold, e.sources["threshold"]) == (0.8, "override:global")
    e = await s.effective(agent="other-bot", node_type="connector")
    assert (e.threshold, e.sources["threshold"]) == (0.85, "override:node_type=connector")
    assert (e.samples, e.sources["samples"]) == (7, "override:node_type=connector")
    e = await s.effective(agent="billing-bot", node_type="connector")  # the agent is most specific
    assert (e.threshold, e.sources["threshold"]) == (0.9, "override:agent=billing-bot")
    assert (e.samples, e.sources["samples"]) == (7, "override:node_type=connector")
    e = await s.effective(agent="billing-bot", node_type="tool")
    assert (e.samples, e.sources["samples"]) == (3, "app.yaml")


@pytest.mark.parametrize(
    ("env", "warning"),
    [
        ({"SIGNOFF_CONFIDENCE_GATE": "perhaps"}, "SIGNOFF_CONFIDENCE_GATE='perhaps'"),
        ({"SIGNOFF_CONFIDENCE_GATE_THRESHOLD": "1.5"}, "not a number in [0, 1]"),
        ({"SIGNOFF_CONFIDENCE_GATE_THRESHOLD": "high"}, "not a number in [0, 1]"),
        ({"SIGNOFF_CONFIDENCE_ESTIMATOR": "oracle"}, "not verbalization or self-consistency"),
        ({"SIGNOFF_CONFIDENCE_SAMPLES": "many"}, "not a whole number"),
        ({"SIGNOFF_CONFIDENCE_CALIBRATE": "2"}, "SIGNOFF_CONFIDENCE_CALIBRATE='2'"),
    ],
)
async def test_env_values_that_do_not_parse_are_ignored(store, clock, env, warning, caplog):
    s = settings(store, clock, GateConfig(threshold=0.6), env)
    e = await s.effective()
    assert not e.enabled and e.threshold == 0.6 and e.samples == 5 and not e.calibrate
    assert any(warning in w for w in s.warnings), s.warnings
    assert warning in caplog.text  # logged, not raised


@pytest.mark.parametrize("samples", [0, 10, -3])
async def test_samples_outside_one_to_nine_fall_back_to_five(store, clock, samples):
    from_yaml = settings(store, clock, GateConfig(samples=samples))
    assert (await from_yaml.effective()).samples == 5
    assert any("using 5" in w for w in from_yaml.warnings)
    from_env = settings(store, clock, env={"SIGNOFF_CONFIDENCE_SAMPLES": str(samples)})
    e = await from_env.effective()
    assert (e.samples, e.sources["samples"]) == (5, "env")
    result = await from_env.change(ADMIN, {"samples": samples})
    assert [c.new for c in result.changes] == [5] and "using 5" in result.warnings[0]


async def test_changes_are_validated_audited_and_removable(store, clock):
    s = settings(store, clock)
    with pytest.raises(Forbidden):
        await s.change(BOB, {"enabled": True})
    with pytest.raises(InvalidRequest) as caught:
        await s.change(ADMIN, {"enabled": True, "threshold": 1.5})
    assert caught.value.fields["field"] == "threshold"
    with pytest.raises(InvalidRequest) as caught:
        await s.change(ADMIN, {"threshold": 0.5}, "node_type", "approval")
    assert caught.value.fields["field"] == "key"
    with pytest.raises(InvalidRequest):
        await s.change(ADMIN, {"threshold": 0.5}, "agent")  # an agent scope needs a key
    assert await store.gate_overrides() == [] and await store.audit_log() == []  # all or nothing

    clock.advance(minutes=1)
    result = await s.change(ADMIN, {"enabled": True, "threshold": 0.8})
    assert {(c.setting, c.old, c.new) for c in result.changes} == {
        ("enabled", None, True),
        ("threshold", None, 0.8),
    }
    again = await s.change(ADMIN, {"threshold": 0.8})
    assert again.changes == ()  # equal: nothing rewritten, nothing audited
    await s.change(ADMIN, {"threshold": None})  # null removes the override
    e = await s.effective()
    assert e.enabled and (e.threshold, e.sources["threshold"]) == (0.75, "default")

    audit = await store.audit_log()
    assert [(a["actor"], a["target"], a["old"], a["new"]) for a in reversed(audit)] == [
        ("alice", "gate.enabled", None, True),
        ("alice", "gate.threshold", None, 0.8),
        ("alice", "gate.threshold", 0.8, None),
    ]
    assert all(a["action"] == "gate.set" and a["at"] == clock.now() for a in audit)


async def test_the_cache_spares_the_database_but_sees_other_replicas(store, clock):
    here, there = settings(store, clock), settings(store, clock)
    assert not (await here.effective()).enabled
    # resolved once per view and snapshot, not at every step
    assert await here.effective("bot", "connector") is await here.effective("bot", "connector")
    await there.change(ADMIN, {"enabled": True})  # another replica
    assert not (await here.effective()).enabled  # cached, at most a second old
    assert (await there.effective()).enabled  # its own change: invalidated at once
    clock.advance(seconds=1)
    assert (await here.effective()).enabled


# -- chat commands ---------------------------------------------------------------------------


@pytest.fixture
def gate(store, clock):
    return ConfidenceGate(settings(store, clock, GateConfig(channels=("web",))), store, clock)


async def test_commands_change_and_report(gate, store):
    result = await run_command(gate, "gate on", ADMIN)
    assert result.outcome == Outcome.CHANGED and result.ok
    assert result.text == "Gate enabled set to on by alice (previous override: none)."
    result = await run_command(gate, "gate threshold 0.9 agent=billing-bot", ADMIN)
    assert "Gate threshold set to 0.9 for agent billing-bot by alice" in result.text
    result = await run_command(gate, "gate threshold 0.9 agent=billing-bot", ADMIN)
    assert result.outcome == Outcome.UNCHANGED and "already 0.9" in result.text
    result = await run_command(gate, "gate samples 12", ADMIN)
    assert result.outcome == Outcome.CHANGED and "set to 5" in result.text
    assert "Warning: samples: 12 is outside 1..9; using 5" in result.text
    result = await run_command(gate, "gate samples 0", ADMIN)
    assert result.outcome == Outcome.UNCHANGED and "Gate samples is already 5;" in result.text

    read = await run_command(gate, "gate status", BOB)  # reading is open to anyone known
    assert read.outcome == Outcome.STATUS and "Confidence gate: ON" in read.text
    refused = await run_command(gate, "gate off", BOB)
    assert refused.outcome == Outcome.REFUSED and "Only an admin can change" in refused.text
    status = await run_command(gate, "gate status", ADMIN)
    assert status.outcome == Outcome.STATUS
    assert "Confidence gate: ON (override:global)" in status.text
    assert "samples 5 (override:global)" in status.text
    assert "threshold=0.9 for agent billing-bot (by alice)" in status.text
    assert "LLM: not configured" in status.text
    status = await run_command(gate, "gate status agent=billing-bot", ADMIN)
    assert "threshold 0.9 (override:agent=billing-bot)" in status.text

    audit = await store.audit_log()
    assert [a["target"] for a in reversed(audit)] == [
        "gate.enabled",
        "gate.threshold[agent=billing-bot]",
        "gate.samples",
    ]


async def test_non_admins_and_bad_arguments_change_nothing(gate, store):
    refused = await run_command(gate, "gate on", BOB)
    assert refused.outcome == Outcome.REFUSED and not refused.ok
    assert "Only an admin" in refused.text
    usage = await run_command(gate, "gate threshold 2", ADMIN)
    assert usage.outcome == Outcome.USAGE and "Usage: gate threshold <0..1>" in usage.text
    assert await store.gate_overrides() == [] and await store.audit_log() == []
    helped = await run_command(gate, "help", BOB)
    assert helped.outcome == Outcome.HELP and "gate calibrate on|off" in helped.text
