"""``AppConfig``: everything ``app.yaml`` and the environment say, as one frozen record.

``engine.config.loading`` builds it; the rest of Signoff reads it. Its methods answer questions
about the configuration as a whole: who a group stands for, whether a workflow names only what
the configuration has.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.config.channels import ChannelSections, channel_warnings
from engine.config.channels.requester import requester_channels
from engine.config.connectors import ConnectorConfig
from engine.config.policies import principal_checker
from engine.config.reach import node_reach_problems, stored_tool_problems
from engine.config.sections import (
    ApprovalsConfig,
    DatabaseConfig,
    GateConfig,
    LlmConfig,
    Person,
    PolicyConfig,
    ServerConfig,
)
from engine.config.tools import ToolConfig
from engine.config.values import join
from engine.config.workflows import parse_workflow
from engine.domain.approvers import is_admin
from engine.domain.errors import ConfigError
from engine.domain.model import Node, NodeType, Workflow
from engine.domain.policy_rules import Rule
from engine.domain.proxies import ProxySettings

__all__ = ["AppConfig", "expand_groups"]


@dataclass(frozen=True, slots=True)
class AppConfig(ChannelSections):
    """Everything ``app.yaml`` and the environment say, validated and immutable. Each channel's
    own section is in ``channel_sections`` (read through ``ChannelSections``)."""

    source: str
    database: DatabaseConfig
    server: ServerConfig
    people: Mapping[str, Person]
    groups: Mapping[str, tuple[str, ...]]
    admins: tuple[str, ...]
    approvers: tuple[str, ...]  # the project's default deciders (people and groups)
    llm: LlmConfig
    gate: GateConfig
    gate_env: Mapping[str, str]  # SIGNOFF_CONFIDENCE_* as found in the environment
    approvals: ApprovalsConfig
    connectors: Mapping[str, ConnectorConfig]
    policy: PolicyConfig
    policies: tuple[Rule, ...]  # project rules; each connector carries its own
    workflows: Mapping[str, Workflow]
    tools: Mapping[str, ToolConfig]  # the Python callables workflows may run (allow-list)
    channel_sections: Mapping[str, object]  # channel name -> its section (``CHANNEL_SECTIONS``)
    rule_problems: tuple[str, ...] = ()  # malformed rules (kept; they fail closed)
    warnings: tuple[str, ...] = ()  # loads, but probably not what was meant
    # The proxy environment, read at load (curl's rules); frozen, so one default serves all.
    proxies: ProxySettings = ProxySettings()  # noqa: RUF009

    def expand_people(self, names: Iterable[str]) -> tuple[str, ...]:
        """People named directly or through groups, first occurrence first, without repeats.
        A name that is neither a group nor a person is kept as given."""
        return expand_groups(names, self.groups)

    def requester_channels(
        self, channels: Iterable[str], requested_by: str | None
    ) -> tuple[str, ...]:
        """Where ``requested_by`` is told how a request to ``channels`` ended
        (``engine.config.channels.requester``)."""
        return requester_channels(channels, requested_by, self.people)

    def person_by_email(self, address: str) -> Person | None:
        """The person whose ``people:`` email is ``address``, whatever its case."""
        wanted = address.casefold()
        found = (p for p in self.people.values() if p.email and p.email.casefold() == wanted)
        return next(found, None)

    def is_admin(self, person: str) -> bool:
        """``engine.domain.approvers.is_admin``: the one rule for who is an admin."""
        return is_admin(self, person)

    def workflow_problems(
        self,
        workflow: Workflow,
        path: str,
        known_workflows: Collection[str] | None = None,
        *,
        stored: bool = False,
    ) -> list[str]:
        """What ``workflow`` (nodes at ``path``) names that this configuration lacks:
        connectors and their actions, tools, child workflows (``known_workflows``, by default
        the ``app.yaml`` ones), people and groups, channel targets (``target_problem``).
        ``stored``: it comes from the API, so its tool nodes may name only declared tools
        (``engine.config.reach``)."""
        nodes = [(join(path, i), node) for i, node in enumerate(workflow.nodes)]
        return self.node_problems(nodes, workflow.name, known_workflows, stored=stored)

    def node_problems(
        self,
        nodes: Iterable[tuple[str, Node]],
        workflow: str,
        known_workflows: Collection[str] | None = None,
        *,
        stored: bool = False,
    ) -> list[str]:
        """``workflow_problems`` for ``(path, node)`` pairs of the workflow named ``workflow``:
        the nodes of a workflow whose graph is sound, or the sound nodes of one that is not
        (``engine.config.workflows.sound_nodes``)."""
        known = self.workflows.keys() if known_workflows is None else known_workflows
        check_principal = principal_checker(list(self.people), list(self.groups))
        default_deciders = self.expand_people(self.approvers)
        problems: list[str] = []
        for at, node in nodes:
            problems.extend(
                node_reach_problems(
                    node,
                    at,
                    connectors=self.connectors,
                    tools=self.tools,
                    channel_problem=self.target_problem,
                    workflow=workflow,
                    known=known,
                    stored=stored,
                )
            )
            for key, names in (("approvers", node.approvers), ("escalateTo", node.escalate_to)):
                for j, name in enumerate(names):
                    if (why := check_principal(name)) is not None:
                        problems.append(f"{at}.{key}[{j}]: {why}")
            if not node.approvers and default_deciders:
                if node.approvals_required > len(default_deciders):
                    problems.append(
                        f"{at}.approvalsRequired: is {node.approvals_required} but the default "
                        f"approvers are only {len(default_deciders)} people"
                    )
        return problems

    def operator_functions(self) -> frozenset[str]:
        """The functions ``app.yaml``'s own workflows name in `tool` nodes (the operator's)."""
        nodes = (n for wf in self.workflows.values() for n in wf.nodes)
        return frozenset(n.function for n in nodes if n.type == NodeType.TOOL and n.function)

    def stored_tool_problems(self, workflow: Workflow) -> list[str]:
        """The tools a stored ``workflow`` names beyond ``tools:`` (checked again before it
        runs: a definition stored before the allow-list existed, or before a tool was removed,
        never runs undeclared code)."""
        return stored_tool_problems(workflow.nodes, "nodes", self.tools)

    def channel_warnings(self, channels: Iterable[str], path: str) -> list[str]:
        """Channels that parse but cannot deliver with this configuration."""
        return channel_warnings(
            channels,
            at=lambda i: join(path, i),
            enabled=lambda name: bool(getattr(self.channel_sections.get(name), "enabled", False)),
        )

    def validate_workflow(
        self, name: str, raw: Any, path: str = "", known_workflows: Collection[str] = ()
    ) -> Workflow:
        """A workflow from the API (``{name, nodes}`` body, ``path=""``): the graph and its
        references (tools only as ``app.yaml`` declares them), with ``known_workflows`` (stored
        ones) besides the ``app.yaml`` ones. Raises ``ConfigError`` with every problem."""
        workflow, problems = parse_workflow(name, raw, path, expand=self.expand_people)
        if workflow is None:
            raise ConfigError(problems)
        nodes_path = (path or "nodes") if isinstance(raw, list) else join(path, "nodes")
        known = {*self.workflows, *known_workflows}
        problems = self.workflow_problems(workflow, nodes_path, known, stored=True)
        if problems:
            raise ConfigError(problems)
        return workflow


def expand_groups(names: Iterable[str], groups: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """``names`` with every group replaced by its people, each once, in order."""
    out: dict[str, None] = {}
    for name in names:
        for person in groups.get(name, (name,)):
            out.setdefault(person)
    return tuple(out)
