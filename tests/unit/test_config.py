"""app.yaml loading: substitution, validation with YAML paths, immutability, helpers."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from engine.config import (
    ActionKind,
    AppConfig,
    ConnectorType,
    Decision,
    Estimator,
    PolicyMode,
    load_config,
    normalize_database_url,
    parse_config,
)
from engine.domain.errors import ConfigError
from engine.domain.model import NodeType

ROOT_APP_YAML = Path(__file__).resolve().parents[2] / "app.yaml"

PEOPLE = """
people:
  alice: {email: alice@example.com, slack: U012ABCDEF, teams: aad-alice}
  bob: {slack: W0BOB1234}
  carol: {}
groups:
  finance: [alice, bob]
  ops: [carol, alice]
admins: [alice]
approvers: [finance]
"""


def with_people(text: str) -> str:
    return PEOPLE + textwrap.dedent(text)


def parse(text: str, env: dict[str, str] | None = None) -> AppConfig:
    return parse_config(textwrap.dedent(text), env or {}, "test.yaml")


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(text, env)
    return caught.value.problems


# --- the shipped file and defaults ------------------------------------------------------------


def test_root_app_yaml_loads_with_an_empty_environment() -> None:
    config = load_config(ROOT_APP_YAML, {})
    assert config.database.url == "sqlite+aiosqlite:///./signoff.db"
    demo = config.workflows["refund-demo"]
    assert [n.id for n in demo.nodes] == ["lookup", "approve", "refund", "notify-denied"]
    approve = demo.node("approve")
    assert approve.reason == (  # what the lookup found, not a figure the caller made up
        "Refund {{ '%.2f'|format(steps.lookup.output.amount) }} "
        "{{ steps.lookup.output.currency }} for {{ input.order }}"
    )
    assert (approve.approvers, approve.channels, approve.on_deny) == (
        ("finance",),
        ("web",),
        "notify-denied",
    )
    assert demo.node("refund").next == "end"
    assert config.expand_people(["finance"]) == ("alice", "bob")
    assert config.admins == ("alice",) and config.approvers == ("finance",)
    assert not config.llm.enabled and not config.slack.enabled and not config.teams.authenticated
    assert config.gate.enabled is None and config.gate.channels == ()
    assert config.connectors["mailer"].base_url == "http://127.0.0.1:9"
    assert config.connectors["demo-ledger"].type is ConnectorType.DEMO_LEDGER
    assert [(r.decision, r.connector, r.action) for r in config.policies] == [
        (Decision.BLOCK, "mailer", "purge*"),
        (Decision.ASK, "mailer", "send"),
        (Decision.ASK, "demo-ledger", "refund"),  # the README's agent example is held
    ]
    assert config.rule_problems == ()


def test_root_app_yaml_reads_its_variables() -> None:
    env = {
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s3cret",
        "TEAMS_APP_ID": "app",
        "SIGNOFF_LLM_BASE_URL": "http://127.0.0.1:1/v1",
        "SIGNOFF_LLM_MODEL": "m",
        "MAILER_URL": "https://mail.internal.example",
    }
    config = load_config(ROOT_APP_YAML, env)
    assert config.slack.enabled and config.teams.authenticated and config.llm.enabled
    assert config.connectors["mailer"].base_url == "https://mail.internal.example"


def test_an_empty_file_is_all_defaults() -> None:
    config = parse("")
    assert config.server.public_url == "http://127.0.0.1:8080"
    assert (config.server.workers, config.server.lease_seconds) == (64, 30)
    assert config.server.poll_seconds == 2.0
    assert config.approvals.ttl_seconds == 86400
    assert config.policy.default_mode is PolicyMode.ALLOW_ALL
    assert config.slack.api_base_url == "https://slack.com/api/"
    assert set(config.connectors) == {"demo-ledger"}
    kinds = {a.name: a.kind for a in config.connectors["demo-ledger"].actions.values()}
    assert kinds == {
        "lookup": ActionKind.READ,
        "refund": ActionKind.WRITE,
        "note": ActionKind.WRITE,
    }
    assert config.workflows == {} and config.warnings[0].startswith("server.secretKey: empty")


def test_load_config_reports_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "missing.yaml", {})
    assert caught.value.problems[0].startswith(f"{tmp_path / 'missing.yaml'}: cannot read")


def test_load_config_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text("server: {port: 9000}\n", encoding="utf-8")
    config = load_config(path, {})
    assert config.server.port == 9000 and config.source == str(path)


# --- ${VAR} substitution ------------------------------------------------------------------------


def test_substitution_of_variables_defaults_and_partial_strings() -> None:
    config = parse(
        """
        server:
          publicUrl: "https://${HOST}/signoff"
          secretKey: "${SECRET:-fallback}"
        slack: {botToken: "${TOKEN}", signingSecret: "${EMPTY:-dflt}"}
        llm: {model: "${A}-${B:-b}"}
        """,
        {"HOST": "example.com", "TOKEN": "xoxb-1", "EMPTY": "", "A": "a"},
    )
    assert config.server.public_url == "https://example.com/signoff"
    assert config.server.secret_key == "fallback"
    assert config.slack.bot_token == "xoxb-1"
    assert config.slack.signing_secret == "dflt"  # like the shell: empty counts as unset
    assert config.llm.model == "a-b"
    assert type(config.slack.bot_token) is str


def test_missing_variable_is_a_problem_at_its_path() -> None:
    found = problems('slack: {botToken: "${SLACK_BOT_TOKEN}", signingSecret: "${ALSO_MISSING}"}')
    assert found == [
        "slack.botToken: environment variable SLACK_BOT_TOKEN is not set",
        "slack.signingSecret: environment variable ALSO_MISSING is not set",
    ]


def test_double_dollar_escapes_a_literal_placeholder() -> None:
    config = parse('llm: {model: "$${NOT_A_VAR} and ${X}"}', {"X": "x"})
    assert config.llm.model == "${NOT_A_VAR} and x"


def test_substitution_happens_after_parsing_so_values_cannot_inject_yaml() -> None:
    config = parse('llm: {model: "${EVIL}"}', {"EVIL": "x}\nserver: {port: 1}\n#"})
    assert config.llm.model == "x}\nserver: {port: 1}\n#"
    assert config.server.port == 8080


def test_substitution_reaches_lists_and_workflow_args() -> None:
    config = parse(
        """
        people: {alice: {}}
        admins: ["${ADMIN}"]
        workflows:
          w:
            nodes: [{id: a, type: connector, connector: demo-ledger, action: note,
                     args: {text: "${GREETING}", nested: ["${GREETING}"]}}]
        """,
        {"ADMIN": "alice", "GREETING": "hi"},
    )
    assert config.admins == ("alice",)
    args = config.workflows["w"].nodes[0].args
    assert args == {"text": "hi", "nested": ["hi"]}
    assert type(args["text"]) is str


def test_substituted_values_are_coerced_for_numbers_and_booleans_but_literals_are_not() -> None:
    env = {"PORT": "9001", "ON": "true", "T": "0.5", "N": "3"}
    config = parse(
        """
        server: {port: "${PORT}", pollSeconds: "${T}"}
        gate: {enabled: "${ON}", threshold: "${T}", samples: "${N}", calibrate: "${UNSET:-}"}
        """,
        env,
    )
    assert config.server.port == 9001 and config.server.poll_seconds == 0.5
    assert (config.gate.enabled, config.gate.threshold, config.gate.samples) == (True, 0.5, 3)
    assert config.gate.calibrate is None  # an empty substitution is "not set"
    assert problems('server: {port: "8080"}') == [
        'server.port: must be an integer, got string "8080"'
    ]


def test_malformed_placeholders() -> None:
    assert problems('llm: {model: "${1BAD}", apiKey: "${OPEN"}') == [
        'llm.model: invalid variable reference "${1BAD}"',
        'llm.apiKey: unterminated ${ in "${OPEN" (write $${ for $)',
    ]


# --- unknown keys, types, several problems ------------------------------------------------------


def test_unknown_key_suggests_the_closest_one() -> None:
    assert problems("server: {prot: 80}") == ["server.prot: unknown key (did you mean port?)"]
    assert problems("sever: {}") == ["sever: unknown key (did you mean server?)"]
    found = problems("llm: {zzz: 1}")
    assert found == [
        "llm.zzz: unknown key (expected one of: apiKey, baseUrl, maxRetries, model, timeoutSeconds)"
    ]


def test_workflow_timeout_out_of_range_has_the_exact_message() -> None:
    found = problems(
        """
        workflows:
          refund:
            nodes:
              - {id: a, type: approval}
              - {id: b, type: approval}
              - {id: c, type: approval, timeoutMinutes: 2000}
        """
    )
    assert found == ["workflows.refund.nodes[2].timeoutMinutes: must be 1..1440, got 2000"]


def test_booleans_are_not_integers() -> None:
    found = problems("server: {port: true, workers: yes, leaseSeconds: 1.5}\nllm: {maxRetries: no}")
    assert found == [
        "server.port: must be an integer, got boolean true",
        "server.workers: must be an integer, got boolean true",
        "server.leaseSeconds: must be an integer, got number",
        "llm.maxRetries: must be an integer, got boolean false",
    ]


def test_every_problem_is_reported_at_once() -> None:
    found = problems(
        """
        server: {port: 70000, workers: 0, pollSeconds: 0.01, hots: x}
        database: {url: "mysql://root:hunter2@db/x"}
        people: {Alice: {slack: alice}}
        approvals: {ttl: 3w}
        policy: {defaultMode: strict}
        gate: {threshold: 1.5, estimator: vibes}
        workflows:
          w: {nodes: []}
        """
    )
    assert found == [
        "people.Alice: invalid person name (lowercase letters, digits, _ . -)",
        'people.Alice.slack: must be a Slack user id like U012ABCDEF, got "alice"',
        'gate.estimator: must be one of self-consistency, verbalization, got "vibes"',
        "gate.threshold: must be 0..1, got 1.5",
        'database.url: unsupported database URL scheme "mysql" (use sqlite+aiosqlite:///path '
        "or postgresql+asyncpg://user@host/db)",
        "server.hots: unknown key (did you mean host?)",
        "server.port: must be 1..65535, got 70000",
        "server.workers: must be 1..256, got 0",
        "server.pollSeconds: must be 0.05..60, got 0.01",
        'approvals.ttl: must be a positive duration like 3600, "90s", "30m", "24h" or "7d", '
        'got string "3w"',
        'policy.defaultMode: must be one of allow_all, risk, got "strict"',
        "workflows.w.nodes: must have at least one node",
    ]
    assert not any("hunter2" in line for line in found)


def test_a_malformed_rule_is_reported_with_the_other_problems_not_after_them() -> None:
    """Independent sections are all checked in one pass: a bad port, an unknown connector type,
    a bad Slack channel, a bad Slack user id and a malformed rule come out together."""
    found = problems(
        """
        server: {port: 99999}
        people: {alice: {slack: not-an-id}}
        connectors: {mailer: {type: smtpp}}
        policies:
          - {decision: blok, connector: mailer}
        workflows:
          refund:
            nodes:
              - {id: a, type: approval, channels: ["slack:#general"]}
        """
    )
    assert sorted(found) == [
        'connectors.mailer.type: must be one of http, python, demo-ledger, got "smtpp"',
        'people.alice.slack: must be a Slack user id like U012ABCDEF, got "not-an-id"',
        'policies[0].decision: must be allow, ask or block, got string "blok"',
        "server.port: must be 1..65535, got 99999",
        "workflows.refund.nodes[0].channels[0]: slack channel must be a channel id like "
        'C0123ABCD, @<person or group> or dm, got "#general"',
    ]


def test_one_bad_node_does_not_hide_what_the_other_nodes_name() -> None:
    """A workflow refused for one node's shape still has its sound nodes' references checked."""
    found = problems(
        """
        people: {alice: {}}
        workflows:
          refund:
            nodes:
              - {id: a, type: approval, timeoutMinutes: 2000, next: b}
              - {id: b, type: approval, approvers: [nobody], next: c}
              - {id: c, type: connector, connector: nope, action: x}
        """
    )
    assert found == [
        "workflows.refund.nodes[0].timeoutMinutes: must be 1..1440, got 2000",
        'workflows.refund.nodes[1].approvers[0]: unknown person or group "nobody"',
        'workflows.refund.nodes[2].connector: unknown connector "nope"',
    ]


def test_sections_must_be_mappings() -> None:
    assert problems("server: [1]\npeople: x") == [
        'people: must be a mapping, got string "x"',
        "server: must be a mapping, got list",
    ]
    assert problems("- a") == ["(root): must be a mapping, got list"]


def test_invalid_yaml_and_duplicate_keys() -> None:
    found = problems("server:\n  port: [1,\n")
    assert len(found) == 1 and found[0].startswith("test.yaml:3:1: invalid YAML:")
    assert problems("server:\n  port: 1\n  port: 2\n") == [
        "server.port: duplicate key (lines 2 and 3)"
    ]
    # A repeated key is one problem among the rest, not the only one shown.
    assert problems("server:\n  port: 1\n  port: 99999\nllm: {model: 1}\n") == [
        "server.port: duplicate key (lines 2 and 3)",
        "server.port: must be 1..65535, got 99999",
        "llm.model: must be a string, got integer",
    ]
    assert problems("llm: &a {model: *a}") == [
        "llm.model: a YAML alias may not refer to a structure that contains it"
    ]
    merged = parse(
        """
        connectors:
          a: &http {type: http, baseUrl: "http://x", timeoutSeconds: 5}
          b: {<<: *http, timeoutSeconds: 7}
        """
    )
    assert merged.connectors["a"].timeout_seconds == 5
    assert merged.connectors["b"].timeout_seconds == 7


# --- database and server ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///x.db", "sqlite+aiosqlite:///x.db"),
        ("sqlite+aiosqlite:///./signoff.db", "sqlite+aiosqlite:///./signoff.db"),
        ("postgres://u:p@h/db", "postgresql+asyncpg://u:p@h/db"),
        ("postgresql://u@h:5432/db", "postgresql+asyncpg://u@h:5432/db"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("postgresql+psycopg://u@h/db", None),
        ("mysql://h/db", None),
        ("not a url", None),
    ],
)
def test_database_url_normalization(url: str, expected: str | None) -> None:
    assert normalize_database_url(url) == expected


def test_database_url_from_yaml_and_env_override() -> None:
    assert parse("database: {url: 'sqlite:///data/s.db'}").database.url == (
        "sqlite+aiosqlite:///data/s.db"
    )
    env = {"SIGNOFF_DATABASE_URL": "postgres://u:p@db/signoff"}
    config = parse("database: {url: 'sqlite:///data/s.db'}", env)
    assert config.database.url == "postgresql+asyncpg://u:p@db/signoff"
    assert not config.database.is_sqlite
    assert parse("", {"SIGNOFF_DATABASE_URL": ""}).database.url.startswith("sqlite+aiosqlite")
    assert problems("", {"SIGNOFF_DATABASE_URL": "oracle://x"}) == [
        'database.url: unsupported database URL scheme "oracle" (use sqlite+aiosqlite:///path '
        "or postgresql+asyncpg://user@host/db) (from SIGNOFF_DATABASE_URL)"
    ]


def test_server_environment_overrides() -> None:
    env = {
        "SIGNOFF_HOST": "0.0.0.0",
        "SIGNOFF_PORT": "9090",
        "SIGNOFF_SECRET_KEY": "k",
    }
    config = parse("server: {host: 127.0.0.1, port: 8080, secretKey: yaml}", env)
    assert (config.server.host, config.server.port) == ("0.0.0.0", 9090)
    assert config.server.secret_key == "k"
    assert config.server.public_url == "http://127.0.0.1:9090"
    assert not config.server.public_url_set  # derived: `signoff serve --port` may move it
    assert not any(w.startswith("server.secretKey") for w in config.warnings)
    env["SIGNOFF_PUBLIC_URL"] = "https://signoff.example.com/"
    assert parse("", env).server.public_url == "https://signoff.example.com"
    assert parse("", env).server.public_url_set  # set: kept whatever port is served
    assert parse("server: {publicUrl: 'https://a.example'}").server.public_url_set
    assert problems("", {"SIGNOFF_PORT": "0"}) == [
        "server.port: must be 1..65535, got 0 (from SIGNOFF_PORT)"
    ]


# --- people, groups, helpers --------------------------------------------------------------------


def test_group_expansion_and_person_lookups() -> None:
    config = parse(PEOPLE)
    assert config.expand_people(["finance", "ops", "bob"]) == ("alice", "bob", "carol")
    assert config.expand_people(["carol", "finance"]) == ("carol", "alice", "bob")
    assert config.expand_people(["token:ci"]) == ("token:ci",)
    alice = config.person_by_slack("U012ABCDEF")
    assert alice is not None and alice.email == "alice@example.com"
    assert config.person_by_teams("aad-alice") == alice
    assert config.person_by_slack("U999") is None and config.person_by_teams("x") is None
    assert config.is_admin("alice") and not config.is_admin("bob")


def test_people_and_group_problems() -> None:
    found = problems(
        """
        people:
          alice: {slack: U012ABCDEF, teams: t1, email: nope, phone: 1}
          bob: {slack: U012ABCDEF, teams: t1}
        groups:
          bob: [alice]
          finance: [alice, zed, team]
          team: [alice]
          Bad: []
        admins: [team]
        approvers: [finace]
        """
    )
    assert found == [
        "people.alice.phone: unknown key (expected one of: email, slack, teams, tz)",
        'people.alice.email: not an email address: "nope"',
        "people.bob.slack: same slack id as people.alice.slack",
        "people.bob.teams: same teams id as people.alice.teams",
        "groups.bob: a group cannot have the name of a person",
        'groups.finance[1]: unknown person "zed"',
        'groups.finance[2]: "team" is a group; groups contain people only',
        "groups.Bad: invalid group name (lowercase letters, digits, _ . -)",
        'admins[0]: "team" is a group; list people here',
        'approvers[0]: unknown person or group "finace" (did you mean finance?)',
    ]


# --- freezing -----------------------------------------------------------------------------------


def test_config_is_frozen_all_the_way_down() -> None:
    config = parse(PEOPLE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.admins = ("bob",)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.server.port = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.people["mallory"] = config.people["alice"]  # type: ignore[index]
    with pytest.raises(TypeError):
        config.connectors["demo-ledger"].actions["x"] = None  # type: ignore[index]
    assert isinstance(config.groups["finance"], tuple)


# --- policies -----------------------------------------------------------------------------------


def test_sound_rules_are_compiled() -> None:
    config = parse(
        with_people(
            """
        policies:
          - name: big refunds
            decision: ask
            connector: "demo-*"
            action: refund
            conditions:
              - {arg: amount, match: 're:^\\d{4,}$'}
              - {arg: customer.tier, match: "gold*", negate: true}
            approvers: [finance]
            timeoutMinutes: 20
            channels: [web]
        """
        )
    )
    (rule,) = config.policies
    assert rule.malformed is None and rule.decision is Decision.ASK
    assert (rule.name, rule.connector, rule.action, rule.timeout_minutes) == (
        "big refunds",
        "demo-*",
        "refund",
        20,
    )
    amount, tier = rule.conditions
    assert amount.is_regex and amount.regex is not None and amount.regex.search("12345")
    assert not tier.is_regex and tier.regex is None and tier.negate
    assert rule.approvers == ("finance",) and rule.channels == ("web",)


def test_malformed_rules_are_kept_and_listed_not_fatal() -> None:
    eleven = ", ".join(f"{{arg: a{i}, match: x}}" for i in range(11))
    config = parse(
        with_people(
            f"""
        connectors:
          mailer:
            type: http
            baseUrl: https://mail.example
            actions: {{send: {{}}}}
            policies:
              - {{decision: allow, connector: other}}
        policies:
          - {{decision: ask, conditions: [{{arg: to, match: "re:(unclosed"}}]}}
          - {{decision: block, conditions: [{eleven}]}}
          - {{decision: allow, actoin: send}}
          - {{decision: maybe}}
          - "block everything"
          - {{decision: ask, approvers: [nobody]}}
          - {{decision: 1}}
          - {{action: send}}
          - {{decision: allow, action: list}}
        """
        )
    )
    rules = config.policies
    assert len(rules) == 9
    assert [r.malformed is None for r in rules] == [False] * 8 + [True]
    assert rules[0].malformed is not None and rules[0].malformed.startswith(
        'policies[0].conditions[0].match: invalid regular expression "(unclosed": '
    )
    assert rules[1].malformed == "policies[1].conditions: at most 10 conditions, got 11"
    assert rules[2].malformed == "policies[2].actoin: unknown key (did you mean action?)"
    assert (rules[3].decision, rules[3].decision_raw) == (None, "maybe")
    assert (
        rules[3].malformed
        == 'policies[3].decision: must be allow, ask or block, got string "maybe"'
    )
    assert rules[4].decision is None and rules[4].decision_raw == "block everything"
    assert rules[4].malformed == 'policies[4]: must be a mapping, got string "block everything"'
    assert rules[5].malformed == 'policies[5].approvers[0]: unknown person or group "nobody"'
    assert (rules[6].decision, rules[6].decision_raw) == (None, "1")
    assert rules[7].malformed == "policies[7].decision: required (allow, ask or block)"
    (own,) = config.connectors["mailer"].policies
    assert own.connector == "mailer"
    assert own.malformed == (
        "connectors.mailer.policies[0].connector: a rule of connector mailer applies to it "
        "only, got other"
    )
    assert own.malformed in config.rule_problems
    assert len(config.rule_problems) == 9
    assert all(
        line.split(":")[0].startswith(("policies[", "connectors.")) for line in config.rule_problems
    )


def test_a_policies_section_that_is_not_a_list_is_fatal() -> None:
    assert problems("policies: {decision: block}") == [
        "policies: must be a list of rules, got mapping"
    ]


# --- connectors ---------------------------------------------------------------------------------


def test_connectors_are_parsed_with_defaults() -> None:
    config = parse(
        """
        connectors:
          crm:
            type: http
            baseUrl: https://crm.example/api/
            headers: {Authorization: "Bearer ${CRM_TOKEN}"}
            timeoutSeconds: 3
            sensitive: true
            account: ops@example.com
            actions:
              get: {kind: read, method: GET, path: /customers}
              close:
          hook:
            type: python
            function: my.pkg:handler
            actions: {run: {kind: destructive, summary: "Run {{ args.x }}"}}
        """,
        {"CRM_TOKEN": "t0k"},
    )
    crm = config.connectors["crm"]
    assert crm.base_url == "https://crm.example/api"
    assert dict(crm.headers) == {"Authorization": "Bearer t0k"}
    assert (crm.timeout_seconds, crm.sensitive, crm.account) == (3.0, True, "ops@example.com")
    assert (crm.actions["get"].method, crm.actions["get"].path) == ("GET", "/customers")
    close = crm.actions["close"]
    assert (close.kind, close.method, close.path) == (ActionKind.WRITE, "POST", "/close")
    hook = config.connectors["hook"]
    assert hook.function == "my.pkg:handler" and hook.base_url is None
    run = hook.actions["run"]
    assert (run.kind, run.summary, run.method, run.path) == (
        ActionKind.DESTRUCTIVE,
        "Run {{ args.x }}",
        None,
        None,
    )
    assert "demo-ledger" in config.connectors


def test_connector_problems() -> None:
    found = problems(
        """
        connectors:
          a: {type: http, actions: {x: {kind: delete}}}
          b: {type: python, function: nocolon, baseUrl: "http://x"}
          c: {type: ftp}
          demo-ledger: {type: http, baseUrl: "http://x"}
          e: {type: python, function: "m:f", actions: {post: {method: GET}}}
          f: {type: http, baseUrl: "ftp://x", headers: {"Bad Header": v}}
        """
    )
    assert found == [
        "connectors.a.baseUrl: required",
        'connectors.a.actions.x.kind: must be one of read, write, destructive, got "delete"',
        "connectors.b.baseUrl: only valid on http connectors, not python",
        'connectors.b.function: must look like "module.path:function", got "nocolon"',
        'connectors.c.type: must be one of http, python, demo-ledger, got "ftp"',
        "connectors.demo-ledger.type: the demo-ledger connector must have type demo-ledger",
        "connectors.e.actions.post.method: only valid on http connectors, not python",
        'connectors.f.baseUrl: must be an http:// or https:// URL, got "ftp://x"',
        "connectors.f.headers.Bad Header: invalid header name",
    ]


def test_a_declared_demo_ledger_without_actions_gets_the_default_ones() -> None:
    config = parse("connectors: {demo-ledger: {type: demo-ledger, sensitive: true}}")
    ledger = config.connectors["demo-ledger"]
    assert ledger.sensitive and set(ledger.actions) == {"lookup", "refund", "note"}


# --- gate, approvals, llm, slack, teams ---------------------------------------------------------


def test_gate_keeps_unset_values_as_none_and_captures_env() -> None:
    env = {
        "SIGNOFF_CONFIDENCE_GATE": "on",
        "SIGNOFF_CONFIDENCE_SAMPLES": "42",
        "SIGNOFF_OTHER": "x",
    }
    config = parse(PEOPLE + "gate: {threshold: 0.8, samples: 42, channels: [web]}", env)
    gate = config.gate
    assert (gate.enabled, gate.threshold, gate.estimator, gate.samples) == (None, 0.8, None, 42)
    assert gate.channels == ("web",)
    assert dict(config.gate_env) == {
        "SIGNOFF_CONFIDENCE_GATE": "on",
        "SIGNOFF_CONFIDENCE_SAMPLES": "42",
    }
    verbal = parse("gate: {estimator: verbalization, enabled: true, calibrate: false}").gate
    assert (verbal.estimator, verbal.enabled, verbal.calibrate) == (
        Estimator.VERBALIZATION,
        True,
        False,
    )
    assert problems(PEOPLE + "gate: {approvers: [nobody], channels: ['webhook:x']}") == [
        'gate.channels[0]: unknown webhook "x"',
        'gate.approvers[0]: unknown person or group "nobody"',
    ]


@pytest.mark.parametrize(
    ("ttl", "seconds"),
    [("90", 90), ("'90s'", 90), ("30m", 1800), ("24h", 86400), ("7d", 604800), ("'45'", 45)],
)
def test_approval_ttl_durations(ttl: str, seconds: int) -> None:
    assert parse(f"approvals: {{ttl: {ttl}}}").approvals.ttl_seconds == seconds


@pytest.mark.parametrize("ttl", ["0", "-5", "true", "1.5h", "'h'"])
def test_bad_approval_ttls(ttl: str) -> None:
    (problem,) = problems(f"approvals: {{ttl: {ttl}}}")
    assert problem.startswith("approvals.ttl: must be a positive duration")


def test_platform_sections() -> None:
    config = parse(
        """
        llm: {baseUrl: "http://llm:8000/v1", model: m, timeoutSeconds: 5, maxRetries: 0}
        slack: {botToken: b, signingSecret: s, apiBaseUrl: "http://127.0.0.1:3000/api"}
        teams: {appId: id, appPassword: pw, tenantId: t,
                openIdMetadataUrl: "http://127.0.0.1:1/openid", tokenIssuer: iss}
        """
    )
    assert config.llm.enabled and config.llm.max_retries == 0 and config.llm.timeout_seconds == 5
    assert config.slack.enabled and config.slack.api_base_url == "http://127.0.0.1:3000/api/"
    assert config.teams.authenticated and config.teams.token_issuer == "iss"
    half = parse("slack: {botToken: b}\nteams: {appId: x}")
    assert not half.slack.enabled
    assert "slack: botToken and signingSecret are both needed; Slack is disabled" in half.warnings
    assert "teams.appPassword: empty while teams.appId is set" in half.warnings


# --- workflow references ------------------------------------------------------------------------


def test_workflow_references_are_checked_against_the_configuration() -> None:
    found = problems(
        with_people(
            """
        webhooks:
          audit: {url: "https://hooks.example/x", secret: s}
        workflows:
          main:
            nodes:
              - {id: a, type: connector, connector: demo-ledgr, action: lookup}
              - {id: b, type: connector, connector: demo-ledger, action: refnd}
              - {id: c, type: workflow, workflow: missing}
              - {id: d, type: workflow, workflow: main}
              - {id: e, type: approval, approvers: [finance, zed], escalateAfterMinutes: 5,
                 escalateTo: [nobody], channels: ["webhook:audit", "webhook:other"]}
              - {id: f, type: approval, approvalsRequired: 3}
        """
        )
    )
    assert found == [
        'workflows.main.nodes[0].connector: unknown connector "demo-ledgr" '
        "(did you mean demo-ledger?)",
        'workflows.main.nodes[1].action: connector demo-ledger has no action "refnd" '
        "(did you mean refund?)",
        'workflows.main.nodes[2].workflow: unknown workflow "missing"',
        "workflows.main.nodes[3].workflow: a workflow cannot start itself",
        'workflows.main.nodes[4].channels[1]: unknown webhook "other"',
        'workflows.main.nodes[4].approvers[1]: unknown person or group "zed"',
        'workflows.main.nodes[4].escalateTo[0]: unknown person or group "nobody"',
        "workflows.main.nodes[5].approvalsRequired: is 3 but the default approvers are only "
        "2 people",
    ]


def test_quorum_uses_group_expansion_in_app_yaml() -> None:
    config = parse(
        PEOPLE + "workflows: {w: {nodes: [{id: a, type: approval, approvers: [finance], "
        "approvalsRequired: 2}]}}"
    )
    assert config.workflows["w"].nodes[0].approvals_required == 2


def test_child_workflows_and_loops_between_them() -> None:
    config = parse(
        """
        workflows:
          parent: {nodes: [{id: run-child, type: workflow, workflow: child}]}
          child: {nodes: [{id: ok, type: approval}]}
        """
    )
    assert config.workflows["parent"].nodes[0].type is NodeType.WORKFLOW
    assert problems(
        """
        workflows:
          a: {nodes: [{id: x, type: workflow, workflow: b}]}
          b: {nodes: [{id: y, type: workflow, workflow: a}]}
        """
    ) == ["workflows.a: workflows start each other: a -> b -> a"]


def test_slack_channels_without_slack_are_a_warning_only() -> None:
    config = parse("workflows: {w: {nodes: [{id: a, type: approval, channels: ['slack:C0ABC']}]}}")
    assert any(
        w.startswith("workflows.w.nodes[0].channels[0]: Slack is not configured")
        for w in config.warnings
    )
    enabled = parse(
        "slack: {botToken: b, signingSecret: s}\n"
        "workflows: {w: {nodes: [{id: a, type: approval, channels: ['slack:C0ABC']}]}}"
    )
    assert not any("Slack is not configured" in w for w in enabled.warnings)


def test_validate_workflow_for_the_api() -> None:
    config = parse(PEOPLE + "workflows: {base: {nodes: [{id: a, type: approval}]}}")
    body = {
        "name": "new",
        "nodes": [
            {"id": "x", "type": "workflow", "workflow": "stored"},
            {"id": "y", "type": "workflow", "workflow": "base"},
            {"id": "z", "type": "approval", "approvers": ["finance"], "approvalsRequired": 2},
        ],
    }
    workflow = config.validate_workflow("new", body, "", known_workflows={"stored"})
    assert [n.id for n in workflow.nodes] == ["x", "y", "z"]
    with pytest.raises(ConfigError) as caught:
        config.validate_workflow("new", body, "")
    assert caught.value.problems == ['nodes[0].workflow: unknown workflow "stored"']
    with pytest.raises(ConfigError) as caught:
        config.validate_workflow("new", [*body["nodes"][:1], {"id": "q"}], "nodes")
    assert caught.value.problems == ["nodes[1].type: required"]


def test_webhooks() -> None:
    config = parse("webhooks: {audit: {url: 'https://h.example/x'}}")
    assert config.webhooks["audit"].url == "https://h.example/x"
    assert config.webhooks["audit"].secret == ""
    assert problems("webhooks: {audit: {secret: s}, b: null}") == [
        "webhooks.audit.url: required",
        "webhooks.b: must be a mapping with url, got null",
        "webhooks.b.url: required",
    ]
