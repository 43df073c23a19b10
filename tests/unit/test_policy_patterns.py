"""``re:`` conditions run in linear time (RE2), patterns RE2 refuses are config errors with their
YAML path, and a condition on an over-long argument fails closed (issue 29, item 6)."""

from __future__ import annotations

import textwrap
import time

import pytest

from engine.config import parse_config
from engine.domain.patterns import MAX_MATCHED_CHARS
from engine.domain.policy import evaluate_policy
from engine.domain.policy_rules import Decision

ALLOW, ASK, BLOCK = Decision.ALLOW, Decision.ASK, Decision.BLOCK
LONG = "a" * (MAX_MATCHED_CHARS + 1)

BASE = """
people: {ann: {}}
connectors:
  crm:
    type: http
    baseUrl: https://crm.example
    actions: {get: {kind: read}, update: {kind: write}}
"""


def config(rules: str, connector_rules: str = ""):
    text = BASE + (textwrap.indent(connector_rules, "    ") if connector_rules else "")
    return parse_config(text + textwrap.dedent(rules), {})


def decide(rules: str, args: dict[str, object], action: str = "get"):
    cfg = config(rules)
    assert cfg.rule_problems == ()
    return evaluate_policy(cfg, cfg.connectors["crm"], action, args)


# -- ReDoS -------------------------------------------------------------------------------------

EVIL = r"""
policies:
  - {name: words, decision: allow, connector: crm, action: get,
     conditions: [{arg: q, match: 're:^(\w+\s?)*$'}]}
"""


@pytest.mark.parametrize("length", [24, 30, 60_000])
def test_the_issue_29_redos_pattern_matches_in_milliseconds(length: int) -> None:
    # Python's re took 3 s at 24 characters and doubled with each one more.
    cfg = config(EVIL)
    started = time.perf_counter()
    found = evaluate_policy(cfg, cfg.connectors["crm"], "get", {"q": "a" * length + "!"})
    took = time.perf_counter() - started
    assert found.decision == ALLOW and found.rule == "policy.defaultMode"  # no match: the '!'
    assert took < 0.25, f"{took:.3f} s"
    assert decide(EVIL, {"q": "two words"}).rule == "words"  # and it still matches


# -- patterns RE2 refuses ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (r"(a)\1", "backreferences are not supported"),
        (r"^(?!.*@evil\.example$)", "lookahead is not supported"),
        (r"(?<=@)evil", "lookbehind is not supported"),
        (r"(?>a+)b", "atomic groups"),
        (r"a++", "possessive"),
        (r"done\Z", r"write \z"),
        (r"(unclosed", "missing )"),
    ],
)
def test_a_pattern_re2_refuses_is_a_config_error_naming_its_path(pattern: str, says: str) -> None:
    quoted = pattern.replace("\\", "\\\\")
    cfg = config(
        f"""
        policies:
          - {{decision: allow, connector: crm, action: get,
             conditions: [{{arg: a, match: x}}, {{arg: q, match: "re:{quoted}"}}]}}
        """,
        connector_rules=f"""policies:
  - {{decision: block, action: update, conditions: [{{arg: q, match: "re:{quoted}"}}]}}
""",
    )
    problems = "\n".join(cfg.rule_problems)
    paths = ("policies[0].conditions[1].match", "connectors.crm.policies[0].conditions[0].match")
    for path in paths:
        (line,) = [p for p in cfg.rule_problems if p.startswith(f"{path}: ")]
        assert "invalid regular expression" in line and says in line, problems
    # ...and until someone fixes it, the rules fail closed.
    assert evaluate_policy(cfg, cfg.connectors["crm"], "get", {"a": "x"}).decision == ASK
    assert evaluate_policy(cfg, cfg.connectors["crm"], "update", {}).decision == BLOCK


def test_the_patterns_app_yaml_and_the_docs_use_still_compile() -> None:
    cfg = config(
        r"""
        policies:
          - {decision: ask, conditions: [{arg: to, match: "re:^[^@,;\\s]+@example\\.com$"}]}
          - {decision: ask, conditions: [{arg: n, match: 're:^\d{4,}$'}]}
          - {decision: ask, conditions: [{arg: q, match: 're:(?i)drop\s+table'}]}
          - {decision: ask, conditions: [{arg: q, match: 're:^\pL+$'}]}
        """
    )
    assert cfg.rule_problems == ()


# -- over-long arguments fail closed -------------------------------------------------------------


@pytest.mark.parametrize(
    ("decision", "negate", "args", "expected"),
    [
        ("allow", False, {"q": LONG}, ASK),  # might have matched: never allowed unseen
        ("allow", True, {"q": LONG}, ASK),
        ("ask", False, {"q": LONG}, ASK),
        ("block", False, {"q": LONG}, BLOCK),
        ("block", True, {"q": LONG}, BLOCK),
        ("block", False, {"q": ["a", LONG]}, BLOCK),  # one element too long
        ("block", False, {"q": {"nested": LONG}}, BLOCK),  # a mapping's canonical JSON
        ("block", False, {"q": ["b", LONG]}, ALLOW),  # one element plainly fails: no match
        ("block", False, {"q": "a" * MAX_MATCHED_CHARS}, BLOCK),  # at the limit: read, matches
        ("block", False, {"q": "b" * MAX_MATCHED_CHARS}, ALLOW),  # at the limit: no match
    ],
)
def test_a_condition_on_an_over_long_argument_fails_closed(
    decision: str, negate: bool, args: dict[str, object], expected: Decision
) -> None:
    for match in ("re:a", "*a*"):
        rules = f"""
        policies:
          - {{name: r, decision: {decision}, connector: crm, action: get,
             conditions: [{{arg: q, match: "{match}", negate: {str(negate).lower()}}}]}}
        """
        found = decide(rules, args)
        assert found.decision == expected, (match, found.reason)
        if found.rule == "r" and expected != Decision(decision):
            assert "longer than 65,536 characters" in found.reason, found.reason


def test_a_rule_whose_other_condition_fails_is_not_matched_however_long() -> None:
    rules = """
    policies:
      - {name: r, decision: block, connector: crm, action: get,
         conditions: [{arg: q, match: "re:a"}, {arg: env, match: prod}]}
    """
    assert decide(rules, {"q": LONG, "env": "staging"}).decision == ALLOW
    found = decide(rules, {"q": LONG, "env": "prod"})
    assert (found.decision, found.rule) == (BLOCK, "r")
    assert "argument q is longer than 65,536 characters" in found.reason
    assert "failing closed: block" in found.reason
