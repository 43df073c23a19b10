"""The records of held-call policy: decisions, rules and their conditions, and the modes.

``engine.config.policies`` reads them from ``app.yaml``; ``engine.domain.policy`` evaluates
them. They live in the domain so the rule engine never imports the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from engine.domain.patterns import TextPattern

__all__ = ["MAX_CONDITIONS", "ActionKind", "Condition", "Decision", "PolicyMode", "Rule"]

MAX_CONDITIONS = 10


class Decision(StrEnum):
    ALLOW = "allow"  # run the call now
    ASK = "ask"  # hold the call for a person
    BLOCK = "block"  # refuse the call


class PolicyMode(StrEnum):
    ALLOW_ALL = "allow_all"  # calls no rule decided run
    RISK = "risk"  # reads run; writes and destructive actions are held


class ActionKind(StrEnum):
    READ = "read"  # no side effect (runs under policy.defaultMode: risk)
    WRITE = "write"  # a side effect (held under risk mode)
    DESTRUCTIVE = "destructive"  # an irreversible side effect (held under risk mode)


@dataclass(frozen=True, slots=True)
class Condition:
    """``arg`` (a dot path into the call's arguments) matches ``match``: a glob, or a regular
    expression written ``re:...`` (compiled by RE2 into ``regex``). A missing argument never
    matches."""

    arg: str
    match: str
    negate: bool = False
    regex: TextPattern | None = None  # RE2 (``engine.domain.patterns``): linear time

    @property
    def is_regex(self) -> bool:
        return self.match.startswith("re:")


@dataclass(frozen=True, slots=True)
class Rule:
    """One policy rule; ``connector`` and ``action`` are globs.

    ``malformed`` is None for a sound rule; otherwise the problems (with their paths) and the
    rule must fail closed. ``decision`` is None when ``decision_raw`` is not allow/ask/block."""

    decision: Decision | None
    decision_raw: str
    connector: str = "*"
    action: str = "*"
    conditions: tuple[Condition, ...] = ()
    approvers: tuple[str, ...] = ()
    timeout_minutes: int | None = None
    channels: tuple[str, ...] = ()
    name: str | None = None
    path: str = ""
    malformed: str | None = None
