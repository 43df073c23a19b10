"""The confidence gate's verdict on a step, as journaled in ``confidence_evaluated``'s
``decision`` and shown on cards. A ``StrEnum``: stored and serialised values are the bare
strings they always were."""

from __future__ import annotations

from enum import StrEnum


class GateVerdict(StrEnum):
    EXECUTE = "execute"  # the score reached the threshold (or nobody could be asked): it runs
    DIVERT = "divert"  # a person decides first: the step parks on a gate request
