"""Workflow definitions: parsing the node format and reporting every problem with its path."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from engine.config.workflows import check_channel, load_workflow, parse_workflow
from engine.domain.errors import ConfigError
from engine.domain.model import NodeType, TimeoutBehavior
from engine.domain.workflows import successors

REFUND_DEMO = """
nodes:
  - {id: lookup, type: connector, connector: demo-ledger, action: lookup,
     args: {order: "{{ input.order }}"}}
  - {id: approve, type: approval, reason: "Refund {{ input.amount }} for {{ input.order }}",
     approvers: [finance], channels: [web], timeoutMinutes: 30, onDeny: notify-denied}
  - {id: refund, type: connector, connector: demo-ledger, action: refund,
     args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}, next: end}
  - {id: notify-denied, type: connector, connector: demo-ledger, action: note,
     args: {text: "refund refused"}}
"""


def problems_of(nodes_yaml: str, name: str = "wf") -> list[str]:
    """The problems of a workflow whose node list is ``nodes_yaml``, under ``workflows.wf``."""
    workflow, problems = parse_workflow(name, {"nodes": yaml.safe_load(nodes_yaml)}, "workflows.wf")
    assert (workflow is None) == bool(problems)
    return problems


def one_node(**fields: Any) -> list[dict[str, Any]]:
    return [{"id": "a", **fields}]


def test_refund_demo_parses_into_nodes_and_edges() -> None:
    workflow = load_workflow("refund-demo", yaml.safe_load(REFUND_DEMO), "workflows.refund-demo")
    assert [n.id for n in workflow.nodes] == ["lookup", "approve", "refund", "notify-denied"]
    approve = workflow.node("approve")
    assert approve.type is NodeType.APPROVAL
    assert approve.approvers == ("finance",)
    assert approve.channels == ("web",)
    assert approve.on_deny == "notify-denied"
    assert approve.timeout_behavior is TimeoutBehavior.AUTO_REJECT
    assert workflow.node("refund").args == {
        "order": "{{ input.order }}",
        "amount": "{{ input.amount }}",
    }
    assert successors(workflow, approve) == ("refund", "notify-denied")
    assert successors(workflow, workflow.node("refund")) == ()


def test_defaults_of_an_approval_node() -> None:
    workflow = load_workflow("w", [{"id": "ok", "type": "approval"}], "nodes")
    node = workflow.nodes[0]
    assert node.reason == "Approval required"
    assert node.timeout_minutes == 30
    assert node.approvals_required == 1
    assert node.allow_self_approval is False
    assert node.args == {}


def test_all_fields_map_from_camel_case() -> None:
    nodes = [
        {"id": "think", "type": "ai-step", "prompt": "Summarise", "requiresConfidence": True},
        {"id": "run", "type": "tool", "function": "pkg.mod:do_it", "args": {"n": 1},
         "channels": ["slack:C0123ABCD"], "approvers": ["a", "b"], "approvalsRequired": 2,
         "allowSelfApproval": True, "timeoutMinutes": 5},
        {"id": "gate", "type": "approval", "timeoutMinutes": 60, "timeoutBehavior": "auto-approve",
         "denyReasonRequired": True, "remindBeforeMinutes": 10, "escalateAfterMinutes": 30,
         "escalateTo": ["boss"], "channels": ["teams:Finance Ops", "webhook:audit", "web"]},
        {"id": "child", "type": "workflow", "workflow": "sub-flow",
         "args": {"x": [1, {"y": None}]}},
    ]  # fmt: skip
    workflow = load_workflow("w", nodes, "nodes")
    think, run, gate, child = workflow.nodes
    assert think.requires_confidence is True and think.prompt == "Summarise"
    assert run.function == "pkg.mod:do_it"
    assert (run.approvals_required, run.allow_self_approval, run.timeout_minutes) == (2, True, 5)
    assert gate.timeout_behavior is TimeoutBehavior.AUTO_APPROVE
    assert gate.deny_reason_required is True
    assert (gate.remind_before_minutes, gate.escalate_after_minutes) == (10, 30)
    assert gate.escalate_to == ("boss",)
    assert gate.channels == ("teams:Finance Ops", "webhook:audit", "web")
    assert child.workflow == "sub-flow" and child.args == {"x": [1, {"y": None}]}


def test_api_body_and_node_list_forms_report_api_paths() -> None:
    body = {"name": "w", "nodes": [{"id": "a", "type": "approval", "timeoutMinutes": 0}]}
    _, from_body = parse_workflow("w", body, "")
    _, from_list = parse_workflow("w", body["nodes"], "nodes")
    assert from_body == from_list == ["nodes[0].timeoutMinutes: must be 1..1440, got 0"]
    _, mismatch = parse_workflow("w", {"name": "other", "nodes": body["nodes"]}, "")
    assert 'name: does not match the workflow name "w"' in mismatch


def test_load_workflow_raises_config_error_with_every_problem() -> None:
    with pytest.raises(ConfigError) as caught:
        load_workflow("w", [{"type": "approval"}, {"id": "b", "type": "nope"}], "nodes")
    assert caught.value.problems == [
        "nodes[0].id: required",
        'nodes[1].type: unknown node type "nope" (expected one of: tool, connector, ai-step, '
        "approval, workflow)",
    ]


def test_timeout_out_of_range_has_the_exact_message() -> None:
    nodes = """
    - {id: a, type: approval}
    - {id: b, type: approval}
    - {id: c, type: approval, timeoutMinutes: 2000}
    """
    assert problems_of(nodes) == ["workflows.wf.nodes[2].timeoutMinutes: must be 1..1440, got 2000"]


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        pytest.param(
            one_node(type="approval", timeoutMinuts=5),
            "workflows.wf.nodes[0].timeoutMinuts: unknown key (did you mean timeoutMinutes?)",
            id="unknown-key",
        ),
        pytest.param(
            one_node(type="aistep"),
            'workflows.wf.nodes[0].type: unknown node type "aistep" (did you mean ai-step?)',
            id="unknown-type",
        ),
        pytest.param(one_node(), "workflows.wf.nodes[0].type: required", id="missing-type"),
        pytest.param([{"type": "approval"}], "workflows.wf.nodes[0].id: required", id="missing-id"),
        pytest.param(
            [{"id": "a", "type": "approval"}, {"id": "a", "type": "approval"}],
            'workflows.wf.nodes[1].id: duplicate id "a" (first at workflows.wf.nodes[0])',
            id="duplicate-id",
        ),
        pytest.param(
            [{"id": "end", "type": "approval"}],
            'workflows.wf.nodes[0].id: "end" is reserved (it is the value of next that ends a run)',
            id="end-reserved",
        ),
        pytest.param(
            [{"id": "a b", "type": "approval"}],
            'workflows.wf.nodes[0].id: invalid id "a b" (letters, digits, _ and -; starting with '
            "a letter or digit; at most 100 characters)",
            id="bad-id",
        ),
        pytest.param(
            [{"id": "check", "type": "approval", "next": "chek"}, {"id": "x", "type": "approval"}],
            'workflows.wf.nodes[0].next: no node has id "chek" (did you mean check?)',
            id="dangling-next",
        ),
        pytest.param(
            one_node(type="approval", onDeny="nowhere"),
            'workflows.wf.nodes[0].onDeny: no node has id "nowhere"',
            id="dangling-on-deny",
        ),
        pytest.param(
            one_node(type="approval", onDeny="end"),
            "workflows.wf.nodes[0].onDeny: must name a node (a denial cannot jump to end)",
            id="on-deny-end",
        ),
        pytest.param(
            [
                {"id": "a", "type": "approval"},
                {"id": "b", "type": "approval"},
                {"id": "c", "type": "approval", "next": "a"},
            ],
            "workflows.wf.nodes[2].next: creates a cycle: a -> b -> c -> a",
            id="cycle-next",
        ),
        pytest.param(
            [{"id": "a", "type": "approval"}, {"id": "b", "type": "approval", "onDeny": "a"}],
            "workflows.wf.nodes[1].onDeny: creates a cycle: a -> b -> a",
            id="cycle-on-deny",
        ),
        pytest.param(
            one_node(type="approval", next="a"),
            "workflows.wf.nodes[0].next: creates a cycle: a -> a",
            id="self-loop",
        ),
        pytest.param(
            one_node(type="tool"),
            "workflows.wf.nodes[0].tool: required for tool nodes: the name of a tool app.yaml's "
            "tools: declares",
            id="tool-function",
        ),
        pytest.param(
            one_node(type="tool", function="os.system"),
            'workflows.wf.nodes[0].function: must look like "module.path:function", '
            'got "os.system"',
            id="tool-function-format",
        ),
        pytest.param(
            one_node(type="connector", connector="x"),
            "workflows.wf.nodes[0].action: required for connector nodes",
            id="connector-action",
        ),
        pytest.param(
            one_node(type="connector", action="x"),
            "workflows.wf.nodes[0].connector: required for connector nodes",
            id="connector-connector",
        ),
        pytest.param(
            one_node(type="ai-step"),
            "workflows.wf.nodes[0].prompt: required for ai-step nodes",
            id="ai-step-prompt",
        ),
        pytest.param(
            one_node(type="ai-step", prompt=""),
            "workflows.wf.nodes[0].prompt: must not be empty",
            id="ai-step-empty-prompt",
        ),
        pytest.param(
            one_node(type="workflow"),
            "workflows.wf.nodes[0].workflow: required for workflow nodes",
            id="workflow-name",
        ),
        pytest.param(
            one_node(type="tool", function="m:f", reason="why"),
            "workflows.wf.nodes[0].reason: only valid on approval nodes, not on tool nodes",
            id="approval-only-reason",
        ),
        pytest.param(
            one_node(type="connector", connector="c", action="a", escalateTo=["x"]),
            "workflows.wf.nodes[0].escalateTo: only valid on approval nodes, not on connector "
            "nodes",
            id="approval-only-escalate",
        ),
        pytest.param(
            one_node(type="connector", connector="c", action="a", function="m:f"),
            "workflows.wf.nodes[0].function: only valid on tool nodes, not on connector nodes",
            id="tool-only-function",
        ),
        pytest.param(
            one_node(type="approval", args={"a": 1}),
            "workflows.wf.nodes[0].args: only valid on ai-step or connector or tool or workflow "
            "nodes, not on approval nodes",
            id="args-on-approval",
        ),
        pytest.param(
            one_node(type="tool", function="m:f", args=["a"]),
            "workflows.wf.nodes[0].args: must be a mapping, got list",
            id="args-not-mapping",
        ),
        pytest.param(
            one_node(type="approval", channels=["slack:#general"]),
            "workflows.wf.nodes[0].channels[0]: slack channel must be a channel id like "
            'C0123ABCD, @<person or group> or dm, got "#general"',
            id="slack-channel",
        ),
        pytest.param(
            one_node(type="approval", channels=["fax:bob"]),
            "workflows.wf.nodes[0].channels[0]: must be web, slack:<channel id>, "
            "slack:@<person or group>, slack:dm, teams:<conversation name>, "
            "teams:@<person or group>, teams:dm, email:<address>, email:<person or group>, "
            'email:@<person or group>, email or webhook:<name>, got "fax:bob"',
            id="unknown-channel",
        ),
        pytest.param(
            one_node(type="approval", channels="web"),
            'workflows.wf.nodes[0].channels: must be a list of strings, got string "web"',
            id="channels-not-list",
        ),
        pytest.param(
            one_node(type="approval", timeoutMinutes=True),
            "workflows.wf.nodes[0].timeoutMinutes: must be an integer, got boolean true",
            id="bool-as-int",
        ),
        pytest.param(
            one_node(type="approval", timeoutMinutes="30"),
            'workflows.wf.nodes[0].timeoutMinutes: must be an integer, got string "30"',
            id="string-as-int",
        ),
        pytest.param(
            one_node(type="approval", approvalsRequired=0),
            "workflows.wf.nodes[0].approvalsRequired: must be at least 1, got 0",
            id="quorum-zero",
        ),
        pytest.param(
            one_node(type="approval", approvers=["x"], approvalsRequired=2),
            "workflows.wf.nodes[0].approvalsRequired: is 2 but the approvers are only 1 person",
            id="quorum-too-big",
        ),
        pytest.param(
            one_node(type="approval", allowSelfApproval=1),
            "workflows.wf.nodes[0].allowSelfApproval: must be true or false, got integer",
            id="int-as-bool",
        ),
        pytest.param(
            one_node(type="approval", timeoutBehavior="auto-deny"),
            "workflows.wf.nodes[0].timeoutBehavior: must be one of auto-reject, auto-approve, "
            'got "auto-deny"',
            id="timeout-behavior",
        ),
        pytest.param(
            one_node(type="approval", timeoutMinutes=10, remindBeforeMinutes=10),
            "workflows.wf.nodes[0].remindBeforeMinutes: must be less than timeoutMinutes (10)",
            id="remind-after-timeout",
        ),
        pytest.param(
            one_node(type="approval", escalateAfterMinutes=5),
            "workflows.wf.nodes[0].escalateTo: required when escalateAfterMinutes is set",
            id="escalate-without-target",
        ),
        pytest.param(
            one_node(type="approval", approvers=["x", "x"]),
            'workflows.wf.nodes[0].approvers[1]: duplicate "x"',
            id="duplicate-approver",
        ),
        pytest.param(["a"], 'workflows.wf.nodes[0]: must be a mapping, got string "a"', id="str"),
        pytest.param([], "workflows.wf.nodes: must have at least one node", id="empty"),
        pytest.param(None, "workflows.wf.nodes: required", id="missing-nodes"),
        pytest.param(
            {"a": 1}, "workflows.wf.nodes: must be a list of nodes, got mapping", id="map"
        ),
    ],
)
def test_each_problem_is_reported_with_its_path(nodes: Any, expected: str) -> None:
    _, problems = parse_workflow("wf", {"nodes": nodes}, "workflows.wf")
    assert expected in problems, problems


def test_gate_fields_are_allowed_on_every_node_type() -> None:
    gate_fields = {
        "channels": ["web"],
        "approvers": ["a", "b"],
        "approvalsRequired": 2,
        "allowSelfApproval": True,
        "timeoutMinutes": 15,
    }
    nodes = [
        {"id": "t", "type": "tool", "function": "m:f", **gate_fields},
        {"id": "c", "type": "connector", "connector": "x", "action": "y", **gate_fields},
        {"id": "s", "type": "ai-step", "prompt": "p", "requiresConfidence": True, **gate_fields},
        {"id": "w", "type": "workflow", "workflow": "child", **gate_fields},
    ]
    workflow = load_workflow("w", nodes, "nodes")
    assert all(n.channels == ("web",) and n.timeout_minutes == 15 for n in workflow.nodes)


def test_quorum_counts_people_after_group_expansion() -> None:
    groups = {"finance": ("alice", "bob")}

    def expand(names: Any) -> tuple[str, ...]:
        return tuple(p for name in names for p in groups.get(name, (name,)))

    nodes = one_node(type="approval", approvers=["finance"], approvalsRequired=2)
    assert load_workflow("w", nodes, "nodes", expand=expand).nodes[0].approvals_required == 2
    _, problems = parse_workflow(
        "w",
        one_node(type="approval", approvers=["finance", "alice"], approvalsRequired=3),
        "nodes",
        expand=expand,
    )
    assert problems == ["nodes[0].approvalsRequired: is 3 but the approvers are only 2 people"]


def test_args_must_be_json_data() -> None:
    nodes = yaml.safe_load("[{id: a, type: tool, function: 'm:f', args: {when: 2024-01-02}}]")
    _, problems = parse_workflow("w", nodes, "nodes")
    assert problems == [
        "nodes[0].args.when: must be JSON data (string, number, boolean, list, mapping), got date"
    ]


def test_args_are_copied_not_shared_with_the_input() -> None:
    raw = one_node(type="tool", function="m:f", args={"deep": {"k": [1]}})
    workflow = load_workflow("w", raw, "nodes")
    raw[0]["args"]["deep"]["k"].append(2)
    assert workflow.nodes[0].args == {"deep": {"k": [1]}}


@pytest.mark.parametrize("name", ["", "-x", "has space", "x" * 101, "a/b"])
def test_workflow_names_are_checked(name: str) -> None:
    _, problems = parse_workflow(name, [{"id": "a", "type": "approval"}], "nodes")
    assert len(problems) == 1 and problems[0].startswith("name: invalid workflow name")
    _, problems = parse_workflow(name, {"nodes": [{"id": "a", "type": "approval"}]}, "workflows.x")
    assert problems[0].startswith("workflows.x: invalid workflow name")


@pytest.mark.parametrize("name", ["a", "refund-demo", "v1.2_beta", "9lives", "x" * 100])
def test_valid_workflow_names(name: str) -> None:
    assert load_workflow(name, [{"id": "a", "type": "approval"}], "nodes").name == name


def test_several_problems_are_reported_at_once() -> None:
    nodes = """
    - {id: a, type: tool, function: "x", next: c, reason: r, promt: hi}
    - {id: a, type: approval, timeoutMinutes: 2000, approvalsRequired: true}
    - {id: end, type: aistep}
    - {id: b, type: approval, next: zz}
    """
    problems = problems_of(nodes)
    assert problems == [
        "workflows.wf.nodes[0].promt: unknown key (did you mean prompt?)",
        "workflows.wf.nodes[0].reason: only valid on approval nodes, not on tool nodes",
        'workflows.wf.nodes[0].function: must look like "module.path:function", got "x"',
        "workflows.wf.nodes[1].timeoutMinutes: must be 1..1440, got 2000",
        "workflows.wf.nodes[1].approvalsRequired: must be an integer, got boolean true",
        'workflows.wf.nodes[1].id: duplicate id "a" (first at workflows.wf.nodes[0])',
        'workflows.wf.nodes[2].id: "end" is reserved (it is the value of next that ends a run)',
        'workflows.wf.nodes[2].type: unknown node type "aistep" (did you mean ai-step?)',
        'workflows.wf.nodes[0].next: no node has id "c"',
        'workflows.wf.nodes[3].next: no node has id "zz"',
    ]


def test_forward_jumps_and_deny_paths_are_not_cycles() -> None:
    nodes = """
    - {id: a, type: approval, next: c, onDeny: b}
    - {id: b, type: approval, next: end}
    - {id: c, type: approval, onDeny: b}
    """
    assert problems_of(nodes) == []


@pytest.mark.parametrize(
    "channel", ["web", "slack:C0123ABCD", "slack:G12", "teams:Finance Ops", "webhook:audit-log"]
)
def test_valid_channels(channel: str) -> None:
    assert check_channel(channel) is None


@pytest.mark.parametrize(
    "channel", ["Web", "slack:", "slack:general", "teams:", "teams: ", "webhook:", "webhook:a b"]
)
def test_invalid_channels(channel: str) -> None:
    assert check_channel(channel) is not None
