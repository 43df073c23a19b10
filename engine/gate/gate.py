"""The confidence gate: ``engine.ports.StepGate``, asked by the interpreter once per step.

Gated: ``tool`` and ``connector`` steps whenever the gate is on, ``ai-step`` only with
``requiresConfidence: true``; anything else (and everything while the gate is off) gets None
back, cheaply: the settings come from a cache, so an idle gate costs no database query.

A gated step is scored by the configured estimator, optionally calibrated, and compared with
the threshold: a score equal to the threshold executes. Below it, the step is diverted to an
approval carrying its exact arguments and the score (the interpreter parks it on the returned
``channels``/``approvers``: the step's own, else ``gate.channels``/``gate.approvers``). With no
approval channel at all nobody could decide, so it auto-approves and the data says why. An
estimator that could not produce any answer (every LLM sample failed), or a gate error, diverts
whatever the threshold: the gate never executes on a guess it could not make (unless, again, no
channel exists to divert to; the journal then carries both the error and the auto-approval).

The returned dict is journaled as ``confidence_evaluated`` and shown on the card:
``{score, threshold, decision, node_type, estimator, detail, votes?, samples?, base_score?,
regret?, regret_samples?, calibration?, fallback?, error?, auto_approved?, channels?,
approvers?}``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.config import AppConfig
from engine.domain.approvers import approver_names, rating_refusal
from engine.domain.errors import Forbidden, InvalidRequest
from engine.domain.model import JournalEntry, NodeType, Principal
from engine.domain.verdicts import GateVerdict
from engine.gate.calibration import MIN_SAMPLES, Calibration, adjust
from engine.gate.estimators import ConfidenceEstimator, all_estimators
from engine.gate.settings import EffectiveSettings, GateSettings, Override
from engine.ports import Clock, GateQuestion, Sampler
from engine.ports.store import GateStore

log = logging.getLogger(__name__)

MAX_COMMENT = 4000


@dataclass(frozen=True, slots=True)
class GateStatus:
    """What ``GET /v1/gate`` and ``gate status`` show."""

    effective: EffectiveSettings
    overrides: tuple[Override, ...]
    warnings: tuple[str, ...]
    llm_configured: bool
    agent: str | None = None
    node_type: str | None = None


class ConfidenceGate:
    """Scores pending steps; also owns the gate's settings and the feedback that calibrates it.
    Front ends reach it as ``engine.gate``."""

    def __init__(
        self,
        settings: GateSettings,
        store: GateStore,
        clock: Clock,
        *,
        sampler: Sampler | None = None,
        estimators: Mapping[str, ConfidenceEstimator] | None = None,
        calibration: Calibration | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.sampler = sampler
        self.estimators = dict(estimators or all_estimators(sampler))
        self.calibration = calibration or Calibration(store, clock)

    @classmethod
    def from_config(
        cls, config: AppConfig, store: GateStore, clock: Clock, sampler: Sampler | None
    ) -> ConfidenceGate:
        llm = config.llm
        # A backstop for any Sampler: every attempt timing out plus every allowed wait.
        backstop = llm.timeout_seconds * (2 * llm.max_retries + 1) + 1.0
        return cls(
            GateSettings(config.gate, config.gate_env, store, clock),
            store,
            clock,
            sampler=sampler,
            estimators=all_estimators(sampler, sample_timeout_seconds=backstop),
        )

    # -- StepGate ------------------------------------------------------------------------------

    async def assess(self, question: GateQuestion) -> dict[str, Any] | None:
        if not is_gated(question):
            return None
        settings = await self.settings.effective(question.agent, question.node_type)
        if not settings.enabled:
            return None
        try:
            data = await self._score(question, settings)
        except Exception as exc:  # the step must not run on a score nobody computed
            log.exception("confidence gate failed on %s/%s", question.run_id, question.step_id)
            data = self._base(question, settings, 0.0, settings.estimator.value)
            data.update(
                decision=GateVerdict.DIVERT,
                detail="the confidence gate failed; a person decides",
                error=f"{type(exc).__name__}: {exc}",
            )
        return self._route(question, settings, data)

    async def _score(self, question: GateQuestion, settings: EffectiveSettings) -> dict[str, Any]:
        estimator = self.estimators[settings.estimator.value]
        found = await estimator.estimate(question, settings.samples)
        data = self._base(question, settings, round(found.score, 4), found.estimator)
        data["detail"] = found.detail
        if found.votes is not None:
            data.update(votes=list(found.votes), samples=len(found.votes))
        if found.fallback:
            data["fallback"] = found.fallback
        if settings.calibrate:
            await self._calibrate(question, data)
        if found.failed:
            data.update(decision=GateVerdict.DIVERT, error=found.failed)
        else:
            execute = data["score"] >= settings.threshold
            data["decision"] = GateVerdict.EXECUTE if execute else GateVerdict.DIVERT
        return data

    async def _calibrate(self, question: GateQuestion, data: dict[str, Any]) -> None:
        base = data["score"]
        try:
            regret = await self.calibration.regret(question.agent, question.node_type)
        except Exception as exc:
            log.warning("confidence gate: calibration skipped: %s", exc)
            data.update(base_score=base, calibration=f"skipped ({type(exc).__name__}); base kept")
            return
        data.update(base_score=base, regret=round(regret.regret, 4), regret_samples=regret.samples)
        if regret.samples < MIN_SAMPLES:
            data["calibration"] = f"{regret.samples} samples (fewer than {MIN_SAMPLES}); base kept"
        else:
            data["score"] = round(adjust(base, regret), 4)
            data["calibration"] = f"{regret.bad} of {regret.samples} auto-executed steps regretted"

    @staticmethod
    def _base(
        question: GateQuestion, settings: EffectiveSettings, score: float, estimator: str
    ) -> dict[str, Any]:
        return {
            "score": score,
            "threshold": settings.threshold,
            "decision": GateVerdict.DIVERT,
            "node_type": question.node_type,
            "estimator": estimator,
        }

    @staticmethod
    def _route(
        question: GateQuestion, settings: EffectiveSettings, data: dict[str, Any]
    ) -> dict[str, Any]:
        if data["decision"] != GateVerdict.DIVERT:
            return data
        channels = question.channels or settings.channels
        if not channels:
            data["decision"] = GateVerdict.EXECUTE
            data["auto_approved"] = (
                "diverted, but no approval channel is configured for this step (the step's "
                "channels, or gate.channels in app.yaml), so it was auto-approved"
            )
            return data
        data["channels"] = list(channels)
        data["approvers"] = list(approver_names(question.approvers, settings.approvers))
        return data

    # -- feedback and status -------------------------------------------------------------------

    async def record_feedback(
        self,
        run_id: str,
        step_id: str,
        score: int,
        comment: str | None,
        who: Principal | str,
    ) -> JournalEntry:
        """Journal ``feedback_recorded {score, comment, by}`` on a step (any run status).
        The 👍/👎 buttons of executed-step notices record 5 and 1. ``InvalidRequest`` for a
        score outside 1..5, ``NotFound`` for an unknown run or step, ``Forbidden`` for an agent
        (only people rate; ``engine.domain.approvers.rating_refusal``)."""
        if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
            raise InvalidRequest(
                f"score: must be a whole number 1..5, got {score!r}", field="score"
            )
        if comment is not None and len(comment) > MAX_COMMENT:
            raise InvalidRequest(f"comment: at most {MAX_COMMENT} characters", field="comment")
        if isinstance(who, Principal) and (refused := rating_refusal(who)) is not None:
            raise Forbidden(refused)  # a person's rating is never overwritten by an agent's
        name = who.name if isinstance(who, Principal) else who
        entry = await self.store.append_feedback(
            run_id, step_id, score, comment, name, self.clock.now()
        )
        self.calibration.invalidate()
        return entry

    async def status(self, agent: str | None = None, node_type: str | None = None) -> GateStatus:
        """The effective settings (for ``agent``/``node_type`` when given), read fresh."""
        effective = await self.settings.effective(agent, node_type, fresh=True)
        return GateStatus(
            effective=effective,
            overrides=await self.settings.overrides(),
            warnings=self.settings.warnings,
            llm_configured=self.sampler is not None,
            agent=agent,
            node_type=node_type,
        )


def is_gated(question: GateQuestion) -> bool:
    """Whether the gate looks at this step at all (when it is on)."""
    if question.node_type in (NodeType.TOOL.value, NodeType.CONNECTOR.value):
        return True
    return question.node_type == NodeType.AI_STEP.value and question.requires_confidence
