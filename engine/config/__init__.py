"""``app.yaml`` into one frozen ``AppConfig``, loaded once at the app factory.

Nothing else in Signoff reads ``os.environ``: the caller hands ``env`` in, and the loader applies
``${VAR}`` substitution and the ``SIGNOFF_*`` overrides (database URL, host, port, public URL,
secret key) and keeps the raw confidence-gate variables in ``gate_env`` (they are resolved
env -> ``app.yaml`` -> runtime overrides by the gate). A bad file raises ``ConfigError`` listing
every problem, each line starting with the YAML path of the bad key. Malformed policy rules do
not fail the load (see ``engine.config.policies``); they are listed in ``rule_problems``.

Sections live beside this module: connectors in ``config_connectors``, rules in
``config_policies``, value readers and ``${VAR}`` substitution in ``config_values``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from engine.config.connectors import ActionConfig, ConnectorConfig, ConnectorType, parse_connectors
from engine.config.policies import parse_rules, principal_checker
from engine.config.sections import (
    GATE_ENV,
    ApprovalsConfig,
    DatabaseConfig,
    GateConfig,
    LlmConfig,
    Person,
    PolicyConfig,
    ServerConfig,
    SlackConfig,
    TeamsConfig,
    WebhookConfig,
    normalize_database_url,
    parse_approvals,
    parse_database,
    parse_gate,
    parse_llm,
    parse_people,
    parse_policy,
    parse_server,
    parse_slack,
    parse_teams,
    parse_webhooks,
)
from engine.config.values import Section, join, substitute, suggest, type_name
from engine.config.workflows import check_channel, parse_workflow
from engine.domain.approvers import is_admin
from engine.domain.confidence import Estimator
from engine.domain.errors import ConfigError
from engine.domain.model import NodeType, Workflow
from engine.domain.policy_rules import ActionKind, Condition, Decision, PolicyMode, Rule

__all__ = [
    "GATE_ENV",
    "ActionConfig",
    "ActionKind",
    "AppConfig",
    "ApprovalsConfig",
    "Condition",
    "ConnectorConfig",
    "ConnectorType",
    "DatabaseConfig",
    "Decision",
    "Estimator",
    "GateConfig",
    "LlmConfig",
    "Person",
    "PolicyConfig",
    "PolicyMode",
    "Rule",
    "ServerConfig",
    "SlackConfig",
    "TeamsConfig",
    "WebhookConfig",
    "load_config",
    "normalize_database_url",
    "parse_config",
]

_TOP_KEYS = (
    "database",
    "server",
    "people",
    "groups",
    "admins",
    "approvers",
    "llm",
    "slack",
    "teams",
    "gate",
    "approvals",
    "connectors",
    "policy",
    "policies",
    "webhooks",
    "workflows",
)
_PERSON_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]*\Z")


@dataclass(frozen=True, slots=True)
class AppConfig:
    """Everything ``app.yaml`` and the environment say, validated and immutable."""

    source: str
    database: DatabaseConfig
    server: ServerConfig
    people: Mapping[str, Person]
    groups: Mapping[str, tuple[str, ...]]
    admins: tuple[str, ...]
    approvers: tuple[str, ...]  # the project's default deciders (people and groups)
    llm: LlmConfig
    slack: SlackConfig
    teams: TeamsConfig
    gate: GateConfig
    gate_env: Mapping[str, str]  # SIGNOFF_CONFIDENCE_* as found in the environment
    approvals: ApprovalsConfig
    connectors: Mapping[str, ConnectorConfig]
    policy: PolicyConfig
    policies: tuple[Rule, ...]  # project rules; each connector carries its own
    webhooks: Mapping[str, WebhookConfig]
    workflows: Mapping[str, Workflow]
    rule_problems: tuple[str, ...] = ()  # malformed rules (kept; they fail closed)
    warnings: tuple[str, ...] = ()  # loads, but probably not what was meant

    def expand_people(self, names: Iterable[str]) -> tuple[str, ...]:
        """People named directly or through groups, first occurrence first, without repeats.
        A name that is neither a group nor a person is kept as given."""
        return _expand(names, self.groups)

    def person_by_slack(self, user_id: str) -> Person | None:
        return next((p for p in self.people.values() if p.slack == user_id), None)

    def person_by_teams(self, aad_object_id: str) -> Person | None:
        return next((p for p in self.people.values() if p.teams == aad_object_id), None)

    def is_admin(self, person: str) -> bool:
        """``engine.domain.approvers.is_admin``: the one rule for who is an admin."""
        return is_admin(self, person)

    def workflow_problems(
        self, workflow: Workflow, path: str, known_workflows: Collection[str] | None = None
    ) -> list[str]:
        """What ``workflow`` (nodes at ``path``) names that this configuration lacks:
        connectors and their actions, child workflows (``known_workflows``, by default the
        ``app.yaml`` ones), people and groups, webhooks."""
        known = self.workflows.keys() if known_workflows is None else known_workflows
        check_principal = principal_checker(list(self.people), list(self.groups))
        default_deciders = self.expand_people(self.approvers)
        problems: list[str] = []
        for i, node in enumerate(workflow.nodes):
            at = join(path, i)
            if node.type == NodeType.CONNECTOR and node.connector is not None:
                connector = self.connectors.get(node.connector)
                if connector is None:
                    hint = suggest(node.connector, self.connectors, list_all=False)
                    problems.append(
                        f"{at}.connector: unknown connector {json.dumps(node.connector)}{hint}"
                    )
                elif node.action not in connector.actions:
                    hint = suggest(node.action or "", connector.actions)
                    problems.append(
                        f"{at}.action: connector {connector.name} has no action "
                        f"{json.dumps(node.action)}{hint}"
                    )
            if node.type == NodeType.WORKFLOW and node.workflow is not None:
                if node.workflow == workflow.name:
                    problems.append(f"{at}.workflow: a workflow cannot start itself")
                elif node.workflow not in known:
                    hint = suggest(node.workflow, known, list_all=False)
                    problems.append(
                        f"{at}.workflow: unknown workflow {json.dumps(node.workflow)}{hint}"
                    )
            for key, names in (("approvers", node.approvers), ("escalateTo", node.escalate_to)):
                for j, name in enumerate(names):
                    if (why := check_principal(name)) is not None:
                        problems.append(f"{at}.{key}[{j}]: {why}")
            for j, channel in enumerate(node.channels):
                if (why := _webhook_problem(channel, self.webhooks)) is not None:
                    problems.append(f"{at}.channels[{j}]: {why}")
            if not node.approvers and default_deciders:
                if node.approvals_required > len(default_deciders):
                    problems.append(
                        f"{at}.approvalsRequired: is {node.approvals_required} but the default "
                        f"approvers are only {len(default_deciders)} people"
                    )
        return problems

    def channel_warnings(self, channels: Iterable[str], path: str) -> list[str]:
        """Channels that parse but cannot deliver with this configuration."""
        if self.slack.enabled:
            return []
        return [
            f"{join(path, i)}: Slack is not configured (slack.botToken and "
            f"slack.signingSecret), so {channel} gets no card"
            for i, channel in enumerate(channels)
            if channel.startswith("slack:")
        ]

    def validate_workflow(
        self, name: str, raw: Any, path: str = "", known_workflows: Collection[str] = ()
    ) -> Workflow:
        """A workflow from the API (``{name, nodes}`` body, ``path=""``): the graph and its
        references, with ``known_workflows`` (stored ones) besides the ``app.yaml`` ones.
        Raises ``ConfigError`` with every problem."""
        workflow, problems = parse_workflow(name, raw, path, expand=self.expand_people)
        if workflow is None:
            raise ConfigError(problems)
        nodes_path = (path or "nodes") if isinstance(raw, list) else join(path, "nodes")
        known = {*self.workflows, *known_workflows}
        problems = self.workflow_problems(workflow, nodes_path, known)
        if problems:
            raise ConfigError(problems)
        return workflow


def load_config(path: str | Path, env: Mapping[str, str]) -> AppConfig:
    """Read and validate ``path``; raises ``ConfigError`` listing every problem."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{source}: cannot read the configuration: {exc}"]) from exc
    return parse_config(text, env, str(source))


def parse_config(raw_text: str, env: Mapping[str, str], source_name: str = "app.yaml") -> AppConfig:
    """Validate YAML text; ``parse_config("", {})`` is the all-defaults configuration."""
    data = _load_yaml(raw_text, source_name)
    problems: list[str] = []
    data = substitute(data, env, "", problems)
    root = Section(data, "", problems, _TOP_KEYS)
    raw = root.data

    people = parse_people(raw.get("people"), "people", problems, _PERSON_NAME_RE)
    groups = _parse_groups(raw.get("groups"), people, problems)
    check_principal = principal_checker(list(people), list(groups))
    admins = _principals(root, "admins", check_principal, groups, people_only=True)
    approvers = _principals(root, "approvers", check_principal, groups, people_only=False)
    webhooks = parse_webhooks(raw.get("webhooks"), "webhooks", problems)

    def channel_problem(channel: str) -> str | None:
        return _webhook_problem(channel, webhooks)

    rule_problems: list[str] = []
    connectors = parse_connectors(
        raw.get("connectors"),
        "connectors",
        problems,
        rule_problems,
        principal_problem=check_principal,
        channel_problem=channel_problem,
    )
    policies, fatal, bad_rules = parse_rules(
        raw.get("policies"),
        "policies",
        owner=None,
        principal_problem=check_principal,
        channel_problem=channel_problem,
    )
    problems.extend(fatal)
    rule_problems.extend(bad_rules)
    gate = parse_gate(raw.get("gate"), "gate", problems)
    for i, channel in enumerate(gate.channels):
        if (why := check_channel(channel) or channel_problem(channel)) is not None:
            problems.append(f"gate.channels[{i}]: {why}")
    for i, name in enumerate(gate.approvers):
        if (why := check_principal(name)) is not None:
            problems.append(f"gate.approvers[{i}]: {why}")

    database = parse_database(raw.get("database"), env, problems)
    server = parse_server(raw.get("server"), env, problems)
    config = AppConfig(
        source=source_name,
        database=database,
        server=server,
        people=people,
        groups=groups,
        admins=admins,
        approvers=approvers,
        llm=parse_llm(raw.get("llm"), "llm", problems),
        slack=parse_slack(raw.get("slack"), "slack", problems),
        teams=parse_teams(raw.get("teams"), "teams", problems, server.host),
        gate=gate,
        gate_env=MappingProxyType({k: env[k] for k in GATE_ENV if k in env}),
        approvals=parse_approvals(raw.get("approvals"), "approvals", problems),
        connectors=connectors,
        policy=parse_policy(raw.get("policy"), "policy", problems),
        policies=policies,
        webhooks=webhooks,
        workflows=MappingProxyType({}),
        rule_problems=tuple(rule_problems),
    )
    workflows = _parse_workflows(raw.get("workflows"), config, problems)
    if problems:
        raise ConfigError(problems)
    return _with_workflows(config, workflows)


def _with_workflows(config: AppConfig, workflows: dict[str, Workflow]) -> AppConfig:
    warnings = _warnings(config)
    for name, workflow in workflows.items():
        for i, node in enumerate(workflow.nodes):
            at = f"workflows.{name}.nodes[{i}].channels"
            warnings.extend(config.channel_warnings(node.channels, at))
    return dataclasses.replace(
        config, workflows=MappingProxyType(workflows), warnings=tuple(warnings)
    )


def _warnings(config: AppConfig) -> list[str]:
    warnings: list[str] = []
    if not config.server.secret_key:
        warnings.append(
            "server.secretKey: empty, so each process signs links and sessions with a random key "
            "of its own: they stop working at restart and across replicas (set "
            "SIGNOFF_SECRET_KEY)"
        )
    if bool(config.slack.bot_token) != bool(config.slack.signing_secret):
        warnings.append("slack: botToken and signingSecret are both needed; Slack is disabled")
    if config.teams.app_id and not config.teams.app_password:
        warnings.append("teams.appPassword: empty while teams.appId is set")
    warnings.extend(config.channel_warnings(config.gate.channels, "gate.channels"))
    rules = [*config.policies, *(r for c in config.connectors.values() for r in c.policies)]
    for rule in rules:
        warnings.extend(config.channel_warnings(rule.channels, f"{rule.path}.channels"))
    return warnings


def _load_yaml(text: str, source: str) -> Any:
    try:
        tree = yaml.compose(text, Loader=yaml.SafeLoader)
        duplicates = _duplicate_keys(tree, "", frozenset())
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        reason = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([f"{where}: invalid YAML: {reason}"]) from exc
    if duplicates:
        raise ConfigError(duplicates)
    return {} if data is None else data


def _duplicate_keys(node: yaml.Node | None, path: str, above: frozenset[int]) -> list[str]:
    """PyYAML keeps the last of two equal keys silently; a config should say so instead.
    Also refuses an alias to one of its own ancestors (a structure that contains itself)."""
    if node is None:
        return []
    if id(node) in above:
        return [f"{path}: a YAML alias may not refer to a structure that contains it"]
    above = above | {id(node)}
    found: list[str] = []
    if isinstance(node, yaml.MappingNode):
        keys: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in keys:
                found.append(f"{join(path, key)}: duplicate key (lines {keys[key]} and {line})")
            keys[key] = line
            found.extend(_duplicate_keys(value_node, join(path, key), above))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found.extend(_duplicate_keys(item, join(path, i), above))
    return found


def _webhook_problem(channel: str, webhooks: Mapping[str, WebhookConfig]) -> str | None:
    kind, _, target = channel.partition(":")
    if kind != "webhook" or target in webhooks:
        return None
    return f"unknown webhook {json.dumps(target)}{suggest(target, webhooks, list_all=False)}"


def _expand(names: Iterable[str], groups: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for name in names:
        for person in groups.get(name, (name,)):
            out.setdefault(person)
    return tuple(out)


def _parse_groups(
    raw: Any, people: Mapping[str, Person], problems: list[str]
) -> Mapping[str, tuple[str, ...]]:
    groups: dict[str, tuple[str, ...]] = {}
    section = Section(raw, "groups", problems)
    for name, value in section.data.items():
        at = section.at(name)
        if not _PERSON_NAME_RE.match(name):
            problems.append(f"{at}: invalid group name (lowercase letters, digits, _ . -)")
        elif name in people:
            problems.append(f"{at}: a group cannot have the name of a person")
        members = Section({"m": value}, "", problems).texts("m") if value is not None else ()
        if not isinstance(value, list | None):
            problems.append(f"{at}: must be a list of people, got {type_name(value)}")
            continue
        for i, member in enumerate(members):
            if member in section.data:
                problems.append(
                    f"{at}[{i}]: {json.dumps(member)} is a group; groups contain people only"
                )
            elif member not in people:
                hint = suggest(member, people, list_all=False)
                problems.append(f"{at}[{i}]: unknown person {json.dumps(member)}{hint}")
        groups[name] = tuple(dict.fromkeys(members))
    return MappingProxyType(groups)


def _principals(
    root: Section,
    key: str,
    check: Callable[[str], str | None],
    groups: Mapping[str, tuple[str, ...]],
    *,
    people_only: bool,
) -> tuple[str, ...]:
    names = root.texts(key)
    for i, name in enumerate(names):
        if people_only and name in groups:
            root.problems.append(f"{key}[{i}]: {json.dumps(name)} is a group; list people here")
        elif (why := check(name)) is not None:
            root.problems.append(f"{key}[{i}]: {why}")
    return tuple(dict.fromkeys(names))


def _parse_workflows(raw: Any, config: AppConfig, problems: list[str]) -> dict[str, Workflow]:
    section = Section(raw, "workflows", problems)
    workflows: dict[str, Workflow] = {}
    for name, value in section.data.items():
        workflow, found = parse_workflow(name, value, section.at(name), expand=config.expand_people)
        problems.extend(found)
        if workflow is not None:
            workflows[name] = workflow
    names = set(section.data)
    for name, workflow in workflows.items():
        problems.extend(config.workflow_problems(workflow, f"workflows.{name}.nodes", names))
    problems.extend(_child_cycles(workflows))
    return workflows


def _child_cycles(workflows: Mapping[str, Workflow]) -> list[str]:
    """Workflows that start each other in a loop would park forever, each waiting on a child."""
    children = {
        name: [n.workflow for n in wf.nodes if n.type == NodeType.WORKFLOW and n.workflow]
        for name, wf in workflows.items()
    }
    found: list[str] = []
    reported: set[frozenset[str]] = set()
    for start in children:
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            current, trail = stack.pop()
            for child in children.get(current, ()):
                if child == start and len(trail) > 1 and frozenset(trail) not in reported:
                    reported.add(frozenset(trail))
                    loop = " -> ".join([*trail, start])
                    found.append(f"workflows.{start}: workflows start each other: {loop}")
                elif child not in trail and child in children:
                    stack.append((child, [*trail, child]))
    return found
