"""Loading ``app.yaml``: read, substitute ``${VAR}``, validate every section, build ``AppConfig``.

Every problem found is collected and raised at once in a ``ConfigError``, each line starting with
the YAML path of the bad key, malformed policy rules included. A file whose only problems are
malformed rules loads: the rules are kept (``rule_problems``; they fail closed). What loads but is
probably not what was meant is listed in ``warnings``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

from engine.config.app import AppConfig
from engine.config.channels import (
    CHANNEL_SECTIONS,
    PERSON_IDS,
    each_approver_warnings,
    target_problem,
)
from engine.config.connectors import parse_connectors
from engine.config.policies import parse_rules, principal_checker
from engine.config.sections import (
    GATE_ENV,
    Person,
    parse_approvals,
    parse_database,
    parse_gate,
    parse_llm,
    parse_people,
    parse_policy,
    parse_server,
)
from engine.config.tools import parse_tools
from engine.config.values import Section, join, substitute, suggest, type_name
from engine.config.workflows import check_channel, parse_workflow, sound_nodes
from engine.config.yaml_text import load_yaml
from engine.domain.errors import ConfigError
from engine.domain.model import NodeType, Workflow
from engine.domain.proxies import ProxySettings

__all__ = ["TOP_KEYS", "load_config", "parse_config", "parse_data"]

TOP_KEYS = (
    "database",
    "server",
    "people",
    "groups",
    "admins",
    "approvers",
    "llm",
    *(c.key for c in CHANNEL_SECTIONS if c.targets is None),
    "gate",
    "approvals",
    "connectors",
    "policy",
    "policies",
    *(c.key for c in CHANNEL_SECTIONS if c.targets is not None),
    "tools",
    "workflows",
)
_PERSON_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]*\Z")


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
    problems: list[str] = []
    data = load_yaml(raw_text, source_name, problems)
    return parse_data(data, env, source_name, problems)


def parse_data(
    data: Any, env: Mapping[str, str], source_name: str, problems: list[str] | None = None
) -> AppConfig:
    """``parse_config`` of YAML already read (``problems``: those found reading it), for a
    reload that puts together the sections of two files (``engine.config.reloading``)."""
    problems = [] if problems is None else problems
    data = substitute(data, env, "", problems)
    root = Section(data, "", problems, TOP_KEYS)
    raw = root.data

    people = parse_people(raw.get("people"), "people", problems, _PERSON_NAME_RE, PERSON_IDS)
    groups = _parse_groups(raw.get("groups"), people, problems)
    check_principal = principal_checker(list(people), list(groups))
    admins = _principals(root, "admins", check_principal, groups, people_only=True)
    approvers = _principals(root, "approvers", check_principal, groups, people_only=False)
    # database and server are read first (a channel's section may need the server) but their
    # problems listed where they always were.
    server_problems: list[str] = []
    database = parse_database(raw.get("database"), env, server_problems)
    server = parse_server(raw.get("server"), env, server_problems)
    # The sections that declare targets (``webhooks:``) come before the addresses naming them.
    sections: dict[str, object] = {
        c.channel: c.parse(raw.get(c.key), c.key, problems, server)
        for c in CHANNEL_SECTIONS
        if c.targets is not None
    }

    def channel_problem(channel: str) -> str | None:
        return target_problem(channel, sections, people, groups)

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

    problems.extend(server_problems)
    llm = parse_llm(raw.get("llm"), "llm", problems)
    for c in CHANNEL_SECTIONS:
        if c.targets is None:
            sections[c.channel] = c.parse(raw.get(c.key), c.key, problems, server)
    config = AppConfig(
        source=source_name,
        database=database,
        server=server,
        people=people,
        groups=groups,
        admins=admins,
        approvers=approvers,
        llm=llm,
        gate=gate,
        gate_env=MappingProxyType({k: env[k] for k in GATE_ENV if k in env}),
        approvals=parse_approvals(raw.get("approvals"), "approvals", problems),
        connectors=connectors,
        policy=parse_policy(raw.get("policy"), "policy", problems),
        policies=policies,
        workflows=MappingProxyType({}),
        tools=parse_tools(raw.get("tools"), "tools", problems),
        channel_sections=MappingProxyType(sections),
        rule_problems=tuple(rule_problems),
        proxies=ProxySettings.from_env(env),
    )
    workflows = _parse_workflows(raw.get("workflows"), config, problems)
    if problems:
        # The malformed rules go with the rest: a file that fails anyway is reported in full,
        # not its rules only once everything else has been fixed.
        raise ConfigError([*problems, *rule_problems])
    return _with_workflows(config, workflows)


def _with_workflows(config: AppConfig, workflows: dict[str, Workflow]) -> AppConfig:
    warnings = _warnings(config)
    for name, workflow in workflows.items():
        for i, node in enumerate(workflow.nodes):
            at = f"workflows.{name}.nodes[{i}].channels"
            warnings.extend(config.channel_warnings(node.channels, at))
            if not node.approvers and not config.approvers:
                warnings.extend(each_approver_warnings(node.channels, partial(join, at)))
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
    for c in CHANNEL_SECTIONS:
        warnings.extend(c.warnings(config.channel_sections[c.channel]))
    warnings.extend(config.channel_warnings(config.gate.channels, "gate.channels"))
    rules = [*config.policies, *(r for c in config.connectors.values() for r in c.policies)]
    for rule in rules:
        warnings.extend(config.channel_warnings(rule.channels, f"{rule.path}.channels"))
    return warnings


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
    names = set(section.data)
    for name, value in section.data.items():
        at = section.at(name)
        workflow, found = parse_workflow(name, value, at, expand=config.expand_people)
        problems.extend(found)
        if workflow is not None:
            workflows[name] = workflow
        else:  # what its sound nodes name is checked all the same: one bad node hides nothing
            nodes = sound_nodes(value, at, expand=config.expand_people)
            problems.extend(config.node_problems(nodes, name, names))
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
