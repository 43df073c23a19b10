"""The fields of a thread notice, from the outbox payload the engine queued: one reading for
every platform (each renders them with ``render_notice(kind, platform, **fields)``). Text that
comes from a step or an estimator (outputs, errors, details) goes through ``agent_text``: one
line, quoted when it begins like one of Signoff's status lines."""

from __future__ import annotations

import json
from typing import Any

from cards.text import agent_text

SUMMARY_LIMIT = 500


def output_summary(output: Any, limit: int = SUMMARY_LIMIT) -> str | None:
    """A step's output as one short line of text (the full output stays in the journal)."""
    if output is None:
        return None
    text = output if isinstance(output, str) else json.dumps(output, sort_keys=True, default=str)
    text = agent_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def step_result_fields(payload: dict[str, Any], run_id: str | None = None) -> dict[str, Any]:
    ok = bool(payload.get("ok"))
    return {
        "run_id": str(payload.get("runId") or run_id or ""),
        "step_id": str(payload.get("stepId") or ""),
        "ok": ok,
        "error": None if ok else agent_text(str(payload.get("error") or "failed")),
        "output_summary": output_summary(payload.get("output")) if ok else None,
    }


def confidence_fields(payload: dict[str, Any]) -> dict[str, Any]:
    c = payload.get("confidence") or {}
    votes = c.get("votes")
    return {
        "score": float(c.get("score") or 0.0),
        "threshold": float(c.get("threshold") or 0.0),
        "estimator": str(c.get("estimator") or "unknown"),
        "decision": str(c.get("decision") or "divert"),
        "detail": _agent(c.get("error") or c.get("detail")),
        "votes": [bool(v) for v in votes] if isinstance(votes, list) else None,
        "step_id": payload.get("stepId"),
        "node_type": c.get("node_type"),
    }


def _agent(value: Any) -> Any:
    return agent_text(value) if isinstance(value, str) else value
