"""Policy rules from ``app.yaml`` (``policies:`` and each connector's ``policies:``).

A malformed rule never fails the load: it is kept as a ``Rule`` whose ``malformed`` says why
(with its YAML path), and the policy engine fails closed on it, so a typo can only make the
outcome stricter. ``AppConfig.rule_problems`` lists them, and every ``signoff`` command
(``check``, ``migrate``, ``serve`` ...) refuses a file with one (``bot.cli.checks``). Only a
``policies:`` that is not a list at all is a configuration error: there is no rule to keep.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from engine.config.values import Section, join, suggest, type_name
from engine.config.workflows import check_channel
from engine.domain.patterns import PatternError, compile_pattern
from engine.domain.policy_rules import MAX_CONDITIONS, Condition, Decision, Rule

__all__ = ["parse_rules", "principal_checker"]

_RULE_KEYS = (
    "name",
    "decision",
    "connector",
    "action",
    "conditions",
    "approvers",
    "timeoutMinutes",
    "channels",
)
_CONDITION_KEYS = ("arg", "match", "negate")


def parse_rules(
    raw: Any,
    path: str,
    *,
    owner: str | None,
    principal_problem: Callable[[str], str | None],
    channel_problem: Callable[[str], str | None],
) -> tuple[tuple[Rule, ...], list[str], list[str]]:
    """Read a rule list: ``(rules, fatal problems, rule problems)``.

    ``owner`` is the connector whose own ``policies:`` these are (its rules apply to it only).
    ``principal_problem`` / ``channel_problem`` say why an approver / channel is unknown."""
    if raw is None:
        return (), [], []
    if not isinstance(raw, list):
        return (), [f"{path}: must be a list of rules, got {type_name(raw)}"], []
    rules: list[Rule] = []
    rule_problems: list[str] = []
    for i, item in enumerate(raw):
        rule = _parse_rule(item, join(path, i), owner, principal_problem, channel_problem)
        rules.append(rule)
        if rule.malformed is not None:
            rule_problems.extend(rule.malformed.split("\n"))
    return tuple(rules), [], rule_problems


def _parse_rule(
    raw: Any,
    path: str,
    owner: str | None,
    principal_problem: Callable[[str], str | None],
    channel_problem: Callable[[str], str | None],
) -> Rule:
    bad: list[str] = []
    s = Section(raw, path, bad, _RULE_KEYS)
    if not s.valid or raw is None:
        if raw is None:
            bad.append(f"{path}: must be a mapping, got null")
        raw_text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
        return Rule(decision=None, decision_raw=raw_text, path=path, malformed="\n".join(bad))

    decision_value = s.data.get("decision")
    decision_raw = "" if decision_value is None else str(decision_value)
    decision: Decision | None = None
    if decision_value is None:
        s.error("decision", "required (allow, ask or block)")
    elif isinstance(decision_value, str) and decision_value in set(Decision):
        decision = Decision(decision_value)
    else:
        s.error("decision", f"must be allow, ask or block, got {type_name(decision_value)}")

    connector = _glob(s, "connector")
    if owner is not None:
        if connector not in ("*", owner):
            s.error("connector", f"a rule of connector {owner} applies to it only, got {connector}")
        connector = owner
    action = _glob(s, "action")
    conditions = _parse_conditions(s)
    approvers = s.texts("approvers")
    for i, approver in enumerate(approvers):
        if (why := principal_problem(approver)) is not None:
            bad.append(f"{join(s.at('approvers'), i)}: {why}")
    channels = s.texts("channels")
    for i, channel in enumerate(channels):
        if (why := check_channel(channel) or channel_problem(channel)) is not None:
            bad.append(f"{join(s.at('channels'), i)}: {why}")
    timeout = s.integer("timeoutMinutes", None, 1, 1440)
    rule_name = s.text("name")
    return Rule(
        decision=decision,
        decision_raw=decision_raw,
        connector=connector,
        action=action,
        conditions=conditions,
        approvers=approvers,
        timeout_minutes=timeout,
        channels=channels,
        name=rule_name,
        path=path,
        malformed="\n".join(bad) if bad else None,
    )


def _glob(s: Section, key: str) -> str:
    value = s.text(key, "*")
    if not value:
        s.error(key, "must not be empty (use * for any)")
        return "*"
    return value


def _parse_conditions(s: Section) -> tuple[Condition, ...]:
    raw = s.data.get("conditions")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        s.error("conditions", f"must be a list, got {type_name(raw)}")
        return ()
    if len(raw) > MAX_CONDITIONS:
        s.error("conditions", f"at most {MAX_CONDITIONS} conditions, got {len(raw)}")
    conditions: list[Condition] = []
    for i, item in enumerate(raw):
        c = Section(item, join(s.at("conditions"), i), s.problems, _CONDITION_KEYS)
        if item is None:
            s.problems.append(f"{c.path}: must be a mapping, got null")
        if not c.valid or item is None:
            continue
        arg = c.text("arg", required=True)
        match = c.text("match", required=True)
        negate = c.flag("negate", False)
        regex = None
        if match is not None and match.startswith("re:"):
            try:
                regex = compile_pattern(match[3:])
            except PatternError as exc:
                c.error("match", f"invalid regular expression {json.dumps(match[3:])}: {exc}")
        if arg is not None and match is not None:
            conditions.append(Condition(arg=arg, match=match, negate=bool(negate), regex=regex))
    return tuple(conditions)


def principal_checker(people: Sequence[str], groups: Sequence[str]) -> Callable[[str], str | None]:
    """Why a name is neither a person nor a group (None when it is one)."""
    known = (*people, *groups)

    def check(name: str) -> str | None:
        if name in known:
            return None
        return f"unknown person or group {json.dumps(name)}{suggest(name, known, list_all=False)}"

    return check
