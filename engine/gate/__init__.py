"""The confidence gate (off by default): before a side-effecting step runs, score how sure we
are that it should, and send a doubtful one to a person instead of running it.

    settings      where each setting comes from (defaults, app.yaml, env, admins' overrides)
    estimators    verbalization and self-consistency, behind one interface
    calibration   outcome regret from the journal: trust less where we were wrong
    gate          ``ConfidenceGate``: the ``StepGate`` the interpreter asks, plus feedback
    commands      the admins' chat grammar (``gate status``, ``gate threshold 0.8`` ...)

Front ends reach it as ``engine.gate`` (an ``Engine`` attribute): ``engine.gate.record_feedback``
for 👍/👎 and the feedback API, ``run_command(engine.gate, text, who)`` for chat commands,
``engine.gate.status()`` and ``engine.gate.settings.change()`` for ``/v1/gate``.
"""

from __future__ import annotations

from engine.gate.calibration import Calibration, Regret
from engine.gate.commands import CommandResult, Outcome, parse, run_command
from engine.gate.estimators import Estimate, SelfConsistency, Verbalization
from engine.gate.gate import ConfidenceGate, GateStatus, is_gated
from engine.gate.settings import (
    Change,
    ChangeResult,
    EffectiveSettings,
    GateSettings,
    Override,
    Scope,
)

__all__ = [
    "Calibration",
    "Change",
    "ChangeResult",
    "CommandResult",
    "ConfidenceGate",
    "EffectiveSettings",
    "Estimate",
    "GateSettings",
    "GateStatus",
    "Outcome",
    "Override",
    "Regret",
    "Scope",
    "SelfConsistency",
    "Verbalization",
    "is_gated",
    "parse",
    "run_command",
]
