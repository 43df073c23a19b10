"""The policy's evaluation order, matching and fail-closed handling, as one table."""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path

import pytest

from engine.config import parse_config
from engine.domain.policy import evaluate_policy
from engine.domain.policy_rules import Decision

ALLOW, ASK, BLOCK = Decision.ALLOW, Decision.ASK, Decision.BLOCK

BASE = """
people: {ann: {}, ben: {}}
groups: {fin: [ann, ben]}
approvers: [fin]
connectors:
  mailer:
    type: http
    baseUrl: https://mail.internal.example
    actions:
      list: {kind: read}
      send: {kind: write}
      purge: {kind: destructive}
      purge_all: {kind: destructive}
    policies:
      - {name: mailer-list, decision: allow, action: list}
      - {name: mailer-evil, decision: block, action: send,
         conditions: [{arg: to, match: "*@evil.example"}]}
  vault:
    type: http
    baseUrl: https://vault.example
    sensitive: true
    actions: {read: {kind: read}, rotate: {kind: write}}
    policies:
      - {decision: allow, action: read}
  crm:
    type: http
    baseUrl: https://crm.example
    actions: {get: {kind: read}, update: {kind: write}, delete: {kind: destructive}}
  crm2:
    type: http
    baseUrl: https://crm.example
    actions: {get: {kind: read}}
    policies:
      - {decision: block, action: get, conditions: [{arg: q, match: "re:["}]}
"""

CONFIGS = {
    "lists": """
policies:
  - {name: fro, decision: block, connector: crm, action: get,
     conditions: [{arg: tags, match: "fro*"}]}
  - {name: numbers, decision: block, connector: crm, action: get,
     conditions: [{arg: ids, match: "re:^[0-9]+$"}]}
  - {name: any-evil, decision: block, connector: mailer, action: send,
     conditions: [{arg: to, match: "re:^[^@]+@ok\\\\.org$", negate: true}]}
""",
    "main": """
policy: {defaultMode: allow_all}
policies:
  - {name: no-purge, decision: block, connector: mailer, action: "purge*"}
  - {name: external-mail, decision: ask, connector: mailer, action: send,
     conditions: [{arg: to, match: "*@example.com", negate: true}],
     approvers: [fin], channels: [web], timeoutMinutes: 45}
  - {name: big-amounts, decision: ask, connector: "c*", action: update,
     conditions: [{arg: amount, match: "re:^[0-9]{4,}$"}]}
  - {name: vip, decision: block, connector: crm, action: "*",
     conditions: [{arg: customer.tier, match: vip}, {arg: tags.0, match: frozen}]}
  - {name: sql, decision: block, connector: crm, action: get,
     conditions: [{arg: q, match: "re:drop\\\\s+table"}]}
  - {name: not-staging, decision: block, connector: crm, action: delete,
     conditions: [{arg: env, match: staging, negate: true}]}
  - {name: nulls, decision: ask, connector: crm, action: update,
     conditions: [{arg: note, match: "null"}]}
  - {name: flags, decision: ask, connector: crm, action: update,
     conditions: [{arg: urgent, match: "true"}]}
""",
    "risk": "policy: {defaultMode: risk}\n",
    "bad_regex_allow": """
policies:
  - {decision: allow, connector: crm, action: get, conditions: [{arg: q, match: "re:("}]}
""",
    "bad_regex_block": """
policies:
  - {decision: block, connector: crm, action: get, conditions: [{arg: q, match: "re:("}]}
""",
    "eleven_allow": "policies:\n  - {decision: allow, connector: crm, action: get, conditions: ["
    + ", ".join(f"{{arg: a{i}, match: x}}" for i in range(11))
    + "]}\n",
    "eleven_block": "policies:\n  - {decision: block, connector: crm, action: get, conditions: ["
    + ", ".join(f"{{arg: a{i}, match: x}}" for i in range(11))
    + "]}\n",
    "unknown_field_allow": """
policies:
  - {decision: allow, connector: crm, action: get, conditon: [{arg: q, match: x}]}
""",
    "unknown_field_block": """
policies:
  - {decision: block, connector: crm, action: get, conditon: [{arg: q, match: x}]}
""",
    "unknown_condition_key": """
policies:
  - {decision: allow, connector: crm, action: get, conditions: [{arg: q, mach: x}]}
""",
    "bad_decision": """
policies:
  - {decision: allw, connector: crm, action: get}
""",
    "not_a_mapping": """
policies:
  - 7
""",
    "bad_connector_value": """
policies:
  - {decision: allow, connector: 5, action: get}
""",
    "unknown_approver": """
policies:
  - {decision: allow, connector: crm, action: get, approvers: [nobody]}
""",
    "malformed_elsewhere": """
policies:
  - {decision: allow, connector: mailer, action: list, conditon: []}
""",
    "floor_then_block": """
policies:
  - {name: typo, decision: allow, connector: crm, action: "*", conditon: []}
  - {name: stop, decision: block, connector: crm, action: get}
""",
    "floor_then_allow": """
policies:
  - {name: typo, decision: ask, connector: crm, action: "*", conditon: []}
  - {name: open, decision: allow, connector: crm, action: get}
""",
    "negate_missing_block": """
policies:
  - {name: deny-non-prod, decision: block, connector: crm, action: get,
     conditions: [{arg: env, match: prod, negate: true}]}
""",
}

VIP = {"customer": {"tier": "vip"}, "tags": ["frozen", "x"]}
INTERNAL = ["a@example.com", "b@example.com"]
MIXED = ["a@example.com", "x@other.org"]

# (id, config, connector, action, args, decision, deciding rule)
CASES = [
    ("connector-rule-allows", "main", "mailer", "list", {}, ALLOW, "mailer-list"),
    ("project-block", "main", "mailer", "purge", {}, BLOCK, "no-purge"),
    ("action-glob", "main", "mailer", "purge_all", {}, BLOCK, "no-purge"),
    (
        "negated-glob-no-match",
        "main",
        "mailer",
        "send",
        {"to": "a@example.com"},
        ALLOW,
        "policy.defaultMode",
    ),
    ("negated-glob-match", "main", "mailer", "send", {"to": "x@other.org"}, ASK, "external-mail"),
    (
        "project-before-connector",
        "main",
        "mailer",
        "send",
        {"to": "x@evil.example"},
        ASK,
        "external-mail",
    ),
    (
        "missing-arg-negated-never-matches",
        "main",
        "mailer",
        "send",
        {},
        ALLOW,
        "policy.defaultMode",
    ),
    # A condition on a list holds when every element matches; negated, when any does not.
    ("list-every-element", "main", "mailer", "send", {"to": INTERNAL}, ALLOW, "policy.defaultMode"),
    ("list-one-elsewhere", "main", "mailer", "send", {"to": MIXED}, ASK, "external-mail"),
    ("list-empty-is-missing", "main", "mailer", "send", {"to": []}, ALLOW, "policy.defaultMode"),
    ("list-all-match-blocks", "lists", "crm", "get", {"tags": ["frozen", "from"]}, BLOCK, "fro"),
    (
        "list-not-all-match",
        "lists",
        "crm",
        "get",
        {"tags": ["frozen", "x"]},
        ALLOW,
        "policy.defaultMode",
    ),
    ("list-elements-as-json", "lists", "crm", "get", {"ids": [1, 22]}, BLOCK, "numbers"),
    (
        "list-any-bad-element",
        "lists",
        "mailer",
        "send",
        {"to": ["a@ok.org", "b@evil.example"]},
        BLOCK,
        "any-evil",
    ),
    (
        "list-no-bad-element",
        "lists",
        "mailer",
        "send",
        {"to": ["a@ok.org"]},
        ALLOW,
        "policy.defaultMode",
    ),
    # A glob's * matches commas: one string naming two addresses passes *@example.com.
    (
        "glob-star-matches-commas",
        "main",
        "mailer",
        "send",
        {"to": "x@evil.test,a@example.com"},
        ALLOW,
        "policy.defaultMode",
    ),
    (
        "connector-glob-and-regex-on-number",
        "main",
        "crm",
        "update",
        {"amount": 12000},
        ASK,
        "big-amounts",
    ),
    ("regex-no-match", "main", "crm", "update", {"amount": 999}, ALLOW, "policy.defaultMode"),
    ("regex-on-string", "main", "crm", "update", {"amount": "12000"}, ASK, "big-amounts"),
    ("dot-path-and-index", "main", "crm", "get", VIP, BLOCK, "vip"),
    ("index-out-of-range", "main", "crm", "get", {**VIP, "tags": []}, ALLOW, "policy.defaultMode"),
    (
        "glob-is-case-sensitive",
        "main",
        "crm",
        "get",
        {**VIP, "customer": {"tier": "VIP"}},
        ALLOW,
        "policy.defaultMode",
    ),
    (
        "path-through-a-string",
        "main",
        "crm",
        "get",
        {"customer": "vip", "tags": ["frozen"]},
        ALLOW,
        "policy.defaultMode",
    ),
    ("regex-searches-anywhere", "main", "crm", "get", {"q": "x; drop  table users"}, BLOCK, "sql"),
    (
        "regex-case-sensitive",
        "main",
        "crm",
        "get",
        {"q": "DROP TABLE users"},
        ALLOW,
        "policy.defaultMode",
    ),
    ("negate-present-value", "main", "crm", "delete", {"env": "prod"}, BLOCK, "not-staging"),
    (
        "negate-present-value-equal",
        "main",
        "crm",
        "delete",
        {"env": "staging"},
        ALLOW,
        "policy.defaultMode",
    ),
    ("negate-missing-value", "main", "crm", "delete", {}, ALLOW, "policy.defaultMode"),
    ("null-as-json", "main", "crm", "update", {"note": None}, ASK, "nulls"),
    ("boolean-as-json", "main", "crm", "update", {"urgent": True}, ASK, "flags"),
    (
        "sensitive-connector-rule-first",
        "main",
        "vault",
        "read",
        {},
        ALLOW,
        "connectors.vault.policies[0]",
    ),
    ("sensitive-holds-the-rest", "main", "vault", "rotate", {}, ASK, "connectors.vault.sensitive"),
    ("allow-all-default", "main", "crm", "delete", {"env": "staging"}, ALLOW, "policy.defaultMode"),
    ("risk-read-runs", "risk", "crm", "get", {}, ALLOW, "policy.defaultMode"),
    ("risk-write-held", "risk", "crm", "update", {}, ASK, "policy.defaultMode"),
    ("risk-destructive-held", "risk", "crm", "delete", {}, ASK, "policy.defaultMode"),
    ("risk-unknown-action-held", "risk", "crm", "export", {}, ASK, "policy.defaultMode"),
    (
        "risk-sensitive-before-mode",
        "risk",
        "vault",
        "rotate",
        {},
        ASK,
        "connectors.vault.sensitive",
    ),
    # -- fail closed ---------------------------------------------------------------------------
    (
        "bad-regex-allow-is-not-allowed",
        "bad_regex_allow",
        "crm",
        "get",
        {"q": "x"},
        ASK,
        "policies[0]",
    ),
    ("bad-regex-block-blocks", "bad_regex_block", "crm", "get", {"q": "x"}, BLOCK, "policies[0]"),
    (
        "bad-regex-block-even-without-the-arg",
        "bad_regex_block",
        "crm",
        "get",
        {},
        BLOCK,
        "policies[0]",
    ),
    ("eleven-conditions-allow", "eleven_allow", "crm", "get", {}, ASK, "policies[0]"),
    ("eleven-conditions-block", "eleven_block", "crm", "get", {}, BLOCK, "policies[0]"),
    ("unknown-field-allow", "unknown_field_allow", "crm", "get", {"q": "x"}, ASK, "policies[0]"),
    ("unknown-field-block", "unknown_field_block", "crm", "get", {"q": "y"}, BLOCK, "policies[0]"),
    ("unknown-condition-key", "unknown_condition_key", "crm", "get", {}, ASK, "policies[0]"),
    ("unreadable-decision-blocks", "bad_decision", "crm", "get", {}, BLOCK, "policies[0]"),
    (
        "unreadable-rule-blocks-everything",
        "not_a_mapping",
        "mailer",
        "list",
        {},
        BLOCK,
        "policies[0]",
    ),
    (
        "unreadable-target-matches-all",
        "bad_connector_value",
        "mailer",
        "get",
        {},
        ASK,
        "policies[0]",
    ),
    ("unknown-approver-allow", "unknown_approver", "crm", "get", {}, ASK, "policies[0]"),
    (
        "malformed-elsewhere-no-effect",
        "malformed_elsewhere",
        "crm",
        "get",
        {},
        ALLOW,
        "policy.defaultMode",
    ),
    ("malformed-floor-then-block", "floor_then_block", "crm", "get", {}, BLOCK, "stop"),
    ("malformed-floor-beats-allow", "floor_then_allow", "crm", "get", {}, ASK, "typo"),
    ("malformed-floor-over-default", "floor_then_allow", "crm", "update", {}, ASK, "typo"),
    (
        "negate-missing-does-not-block",
        "negate_missing_block",
        "crm",
        "get",
        {},
        ALLOW,
        "policy.defaultMode",
    ),
    (
        "negate-present-blocks",
        "negate_missing_block",
        "crm",
        "get",
        {"env": "dev"},
        BLOCK,
        "deny-non-prod",
    ),
    (
        "malformed-connector-rule",
        "main",
        "crm2",
        "get",
        {"q": "["},
        BLOCK,
        "connectors.crm2.policies[0]",
    ),
]


@functools.cache
def _config(key: str):
    return parse_config(BASE + textwrap.dedent(CONFIGS[key]), {})


@pytest.mark.parametrize(
    ("config", "connector", "action", "args", "decision", "rule"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_policy_table(config, connector, action, args, decision, rule):
    cfg = _config(config)
    found = evaluate_policy(cfg, cfg.connectors[connector], action, args)
    assert (found.decision, found.rule) == (decision, rule), found.reason


def test_table_is_large_enough():
    assert len(CASES) >= 30


def test_decision_carries_the_rules_deciders_channels_and_timeout():
    cfg = _config("main")
    found = evaluate_policy(cfg, cfg.connectors["mailer"], "send", {"to": "x@other.org"})
    assert found.approvers == ("fin",)
    assert found.channels == ("web",)
    assert found.timeout_minutes == 45
    assert found.as_json() == {
        "decision": "ask",
        "rule": "external-mail",
        "reason": "rule external-mail says ask",
    }


def test_fail_closed_reason_names_the_problem():
    cfg = _config("bad_regex_allow")
    found = evaluate_policy(cfg, cfg.connectors["crm"], "get", {"q": "x"})
    assert "malformed" in found.reason and "invalid regular expression" in found.reason
    assert cfg.rule_problems  # and `signoff check` lists it


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("to", "decision"),
    [
        (["a@example.com"], ALLOW),  # the README's own call runs
        (["a@example.com", "b@example.com"], ALLOW),
        ("a@example.com", ALLOW),
        (["a@example.com", "x@evil.test"], ASK),
        ("x@evil.test,a@example.com", ASK),  # one string, two addresses: held
        (["x@evil.test,a@example.com"], ASK),
        (["a@example.com.evil.test"], ASK),
        (["A <a@example.com>"], ASK),
    ],
)
def test_the_shipped_mailer_rule_holds_mail_to_anyone_outside(to, decision):
    cfg = parse_config((ROOT / "app.yaml").read_text(), {})
    assert cfg.rule_problems == ()
    found = evaluate_policy(cfg, cfg.connectors["mailer"], "send", {"to": to, "subject": "Hi"})
    assert found.decision == decision, found.reason
