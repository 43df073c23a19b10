"""Which held-call decision a call gets: ``allow``, ``ask`` or ``block``.

Order, first match wins: the project's rules (``policies:``), then the connector's own rules,
then ``sensitive: true`` on the connector (holds everything left), then ``policy.defaultMode``
(``allow_all``: allow; ``risk``: reads allow, writes and destructive actions ask).

A rule matches when its ``connector`` and ``action`` globs match (``fnmatch.fnmatchcase``: whole
name, case-sensitive) and every condition matches. A condition reads ``arg``, a dot path into the
arguments (``to``, ``recipients.0``, ``order.lines.2.sku``; a number indexes a list), and compares
it with ``match``:

* a glob matches the whole text (``fnmatchcase``);
* ``re:<pattern>`` is a regular expression with ``re.search`` semantics: it matches anywhere in
  the text unless anchored (write ``re:^...$`` for a whole-text match). It runs on RE2
  (``engine.domain.patterns``), in time linear in the text: backreferences and lookaround are
  refused when the config loads;
* a string is compared as it is; a number, boolean, null or mapping through its canonical JSON
  (``5``, ``true``, ``null``, ``{"a":1}``);
* a list is compared element by element (each element as above): the condition holds when
  *every* element matches, so ``{arg: to, match: "re:^[^@,;\\s]+@example\\.com$"}`` holds
  for ``["a@example.com", "b@example.com"]`` and not when one address is elsewhere;
* ``negate: true`` inverts the comparison (on a list: it holds when *any* element does not
  match) -- but a *missing* argument never matches, negated or not: a rule cannot be satisfied
  by leaving an argument out. An empty list is treated like a missing argument.

A glob's ``*`` matches any character, commas and spaces included: ``*@example.com`` matches the
single string ``"x@evil.test,a@example.com"``. A pattern meant for one address must say so
(``re:^[^@,;\\s]+@example\\.com$``, as ``app.yaml`` ships). Because a list condition needs
every element, a ``block`` rule meant to catch *any* bad element is written negated, over the
elements that are fine: ``{arg: to, match: "re:^[^@,;\\s]+@example\\.com$", negate: true}``.

A condition reads at most ``MAX_MATCHED_CHARS`` (65,536) characters of a value (a string, or a
non-string's canonical JSON). A longer one cannot be read: the condition neither holds nor
fails. A rule none of whose conditions fails but one of which cannot be read fails closed
like a malformed rule (below), naming the argument; a rule with a failing condition is simply
not matched.

Malformed rules fail closed. A malformed rule whose target (connector and action globs) matches
the call is not evaluated further (its conditions may be incomplete); it sets a floor under the
outcome: ``block`` -> block, ``allow`` -> ask (never allowed), ``ask`` -> ask, an unreadable
decision -> block. Evaluation then goes on as if the rule were absent, and the stricter of the
floor and that outcome wins, so a typo can only make a call stricter, never open the gate. A
malformed rule whose target cannot be read has the target ``*``/``*``: it matches every call.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engine.domain.binding import canonical_json
from engine.domain.patterns import MAX_MATCHED_CHARS
from engine.domain.policy_rules import (
    MAX_CONDITIONS,
    ActionKind,
    Condition,
    Decision,
    PolicyMode,
    Rule,
)

__all__ = ["PolicedConnector", "PolicyDecision", "PolicySource", "evaluate_policy", "rule_label"]


class _Action(Protocol):
    @property
    def kind(self) -> ActionKind: ...


class PolicedConnector(Protocol):
    """What the policy reads of a connector (``engine.config.ConnectorConfig`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def sensitive(self) -> bool: ...
    @property
    def policies(self) -> Sequence[Rule]: ...
    @property
    def actions(self) -> Mapping[str, _Action]: ...


class _Defaults(Protocol):
    @property
    def default_mode(self) -> PolicyMode: ...


class PolicySource(Protocol):
    """What the policy reads of the project (``engine.config.AppConfig`` is one): its rules
    and ``policy.defaultMode``."""

    @property
    def policies(self) -> Sequence[Rule]: ...
    @property
    def policy(self) -> _Defaults: ...


_STRICTNESS = {Decision.ALLOW: 0, Decision.ASK: 1, Decision.BLOCK: 2}
_MISSING = object()


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """The outcome for one call. ``rule`` names what decided: a rule's ``name`` or YAML path,
    ``connectors.<name>.sensitive`` or ``policy.defaultMode``."""

    decision: Decision
    rule: str
    reason: str
    approvers: tuple[str, ...] = ()  # as the rule names them (people and groups)
    channels: tuple[str, ...] = ()
    timeout_minutes: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The ``policy`` part of a ``policy_evaluated`` event and of the request details."""
        return {"decision": self.decision.value, "rule": self.rule, "reason": self.reason}


def rule_label(rule: Rule) -> str:
    return rule.name or rule.path


def evaluate_policy(
    config: PolicySource,
    connector: PolicedConnector,
    action: str,
    args: Mapping[str, Any],
) -> PolicyDecision:
    """Decide one call of ``connector.action`` with ``args`` (see the module docstring)."""
    floor: PolicyDecision | None = None
    for rule in (*config.policies, *connector.policies):
        if not _target_matches(rule, connector.name, action):
            continue
        if _unsound(rule):
            floor = _stricter(floor, _fail_closed(rule))
            continue
        verdicts = [_condition_verdict(c, args) for c in rule.conditions]
        if False in verdicts:
            continue
        unread = [c.arg for c, v in zip(rule.conditions, verdicts, strict=True) if v is None]
        if unread:
            why = f"argument {unread[0]} is longer than {MAX_MATCHED_CHARS:,} characters"
            floor = _stricter(floor, _fail_closed(rule, unread=why))
            continue
        assert rule.decision is not None  # a sound rule has one
        found = PolicyDecision(
            decision=rule.decision,
            rule=rule_label(rule),
            reason=f"rule {rule_label(rule)} says {rule.decision.value}",
            approvers=rule.approvers,
            channels=rule.channels,
            timeout_minutes=rule.timeout_minutes,
        )
        return _with_floor(found, floor)
    return _with_floor(_fallback(config, connector, action), floor)


def _read_arg(args: Any, path: str) -> Any:
    """The value at a dot path, or ``_MISSING``. A number indexes a list (from 0)."""
    current = args
    for part in path.split("."):
        if isinstance(current, Mapping):
            if part not in current:
                return _MISSING
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def _target_matches(rule: Rule, connector: str, action: str) -> bool:
    return fnmatch.fnmatchcase(connector, rule.connector) and fnmatch.fnmatchcase(
        action, rule.action
    )


def _unsound(rule: Rule) -> bool:
    """Malformed as loaded, or something the loader should have refused (defence in depth)."""
    return (
        rule.malformed is not None
        or rule.decision is None
        or len(rule.conditions) > MAX_CONDITIONS
        or any(c.is_regex and c.regex is None for c in rule.conditions)
    )


def _fail_closed(rule: Rule, *, unread: str | None = None) -> PolicyDecision:
    decision = {
        Decision.BLOCK: Decision.BLOCK,
        Decision.ASK: Decision.ASK,
        Decision.ALLOW: Decision.ASK,
        None: Decision.BLOCK,
    }[rule.decision]
    if unread is None:
        why = (rule.malformed or "invalid rule").split("\n")[0]
        state = f"is malformed ({why})"
    else:
        state = f"cannot be read ({unread})"
    return PolicyDecision(
        decision=decision,
        rule=rule_label(rule),
        reason=f"rule {rule_label(rule)} {state}; failing closed: {decision.value}",
        approvers=rule.approvers,
        channels=rule.channels,
        timeout_minutes=rule.timeout_minutes,
    )


def _condition_verdict(condition: Condition, args: Mapping[str, Any]) -> bool | None:
    """Whether ``condition`` holds; None when a value it reads is too long to read."""
    value = _read_arg(args, condition.arg)
    if value is _MISSING or value == []:
        return False  # never, even negated
    if isinstance(value, list):
        hit = _all_of([_value_verdict(condition, element) for element in value])
    else:
        hit = _value_verdict(condition, value)
    return None if hit is None else hit != condition.negate


def _all_of(verdicts: Sequence[bool | None]) -> bool | None:
    """Three-valued ``all``: one False decides; else one unreadable leaves it open."""
    if False in verdicts:
        return False
    return None if None in verdicts else True


def _value_verdict(condition: Condition, value: Any) -> bool | None:
    text = value if isinstance(value, str) else canonical_json(value)
    if len(text) > MAX_MATCHED_CHARS:
        return None
    if condition.regex is not None:
        return condition.regex.search(text)
    return fnmatch.fnmatchcase(text, condition.match)


def _fallback(config: PolicySource, connector: PolicedConnector, action: str) -> PolicyDecision:
    if connector.sensitive:
        return PolicyDecision(
            decision=Decision.ASK,
            rule=f"connectors.{connector.name}.sensitive",
            reason=f"connector {connector.name} is sensitive: every call no rule decided is held",
        )
    mode = config.policy.default_mode
    if mode == PolicyMode.ALLOW_ALL:
        return PolicyDecision(
            decision=Decision.ALLOW, rule="policy.defaultMode", reason="no rule matched (allow_all)"
        )
    spec = connector.actions.get(action)
    kind = spec.kind if spec is not None else ActionKind.DESTRUCTIVE  # unknown: assume the worst
    decision = Decision.ALLOW if kind == ActionKind.READ else Decision.ASK
    return PolicyDecision(
        decision=decision,
        rule="policy.defaultMode",
        reason=f"no rule matched (risk mode: a {kind.value} action is "
        + ("run)" if decision == Decision.ALLOW else "held)"),
    )


def _stricter(a: PolicyDecision | None, b: PolicyDecision) -> PolicyDecision:
    if a is None or _STRICTNESS[b.decision] > _STRICTNESS[a.decision]:
        return b
    return a


def _with_floor(found: PolicyDecision, floor: PolicyDecision | None) -> PolicyDecision:
    if floor is None or _STRICTNESS[found.decision] >= _STRICTNESS[floor.decision]:
        return found
    return floor
