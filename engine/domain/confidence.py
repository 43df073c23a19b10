"""The ways the confidence gate can score an AI step, as ``gate.estimator`` names them.

``engine.config`` reads the name, ``engine.gate.estimators`` implements each one, and the gate
commands and API accept it: the names live here so none of them owns the others' vocabulary.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Estimator"]


class Estimator(StrEnum):
    SELF_CONSISTENCY = "self-consistency"  # ask the LLM N times, score the share saying execute
    VERBALIZATION = "verbalization"  # read a self-reported "Confidence: 85%"
