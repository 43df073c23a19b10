"""``AppConfig``: everything ``app.yaml`` and the environment say, as one frozen record.

``engine.config.loading`` builds it; the rest of Signoff reads it. Its methods answer questions
about the configuration as a whole: who a group stands for, whether a workflow names only what
the configuration has.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.config.connectors import ConnectorConfig
from engine.config.policies import principal_checker
from engine.config.sections import (
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
)
from engine.config.values import join, suggest
from engine.config.workflows import parse_workflow
from engine.domain.approvers import is_admin
from engine.domain.errors import ConfigError
from engine.domain.model import NodeType, Workflow
from engine.domain.policy_rules import Rule

__all__ = ["AppConfig", "expand_groups", "webhook_problem"]


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
        return expand_groups(names, self.groups)

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
                if (why := webhook_problem(channel, self.webhooks)) is not None:
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


def webhook_problem(channel: str, webhooks: Mapping[str, WebhookConfig]) -> str | None:
    """Why ``channel`` names a webhook ``app.yaml`` does not define, or None."""
    kind, _, target = channel.partition(":")
    if kind != "webhook" or target in webhooks:
        return None
    return f"unknown webhook {json.dumps(target)}{suggest(target, webhooks, list_all=False)}"


def expand_groups(names: Iterable[str], groups: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """``names`` with every group replaced by its people, each once, in order."""
    out: dict[str, None] = {}
    for name in names:
        for person in groups.get(name, (name,)):
            out.setdefault(person)
    return tuple(out)
