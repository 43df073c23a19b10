"""The allow-list of ``app.yaml``'s ``tools:``: what it declares, and what a workflow stored
through the API may name (``engine.config.tools``, ``engine.config.reach``)."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from engine.config import AppConfig, parse_config
from engine.domain.errors import ConfigError

TOOLS = """
tools:
  normalize: {function: "tests.support.tools:record", timeoutSeconds: 10}
  slow: {function: "tests.support.tools:slow"}
webhooks:
  audit: {url: "https://hooks.example/x", secret: s}
"""


def parse(text: str) -> AppConfig:
    return parse_config(textwrap.dedent(text), {}, "test.yaml")


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    return caught.value.problems


def stored_problems(*nodes: dict[str, Any]) -> list[str]:
    """What ``POST /v1/workflows`` would say about ``{name: w, nodes}``."""
    config = parse(TOOLS)
    with pytest.raises(ConfigError) as caught:
        config.validate_workflow("w", {"name": "w", "nodes": list(nodes)})
    return caught.value.problems


NOTE = {"id": "n", "type": "connector", "connector": "demo-ledger", "action": "note"}


def test_tools_are_declared_with_a_function_and_a_time_limit() -> None:
    config = parse(TOOLS)
    assert config.tools["normalize"].function == "tests.support.tools:record"
    assert config.tools["normalize"].timeout_seconds == 10
    assert config.tools["slow"].timeout_seconds == 30  # the default


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        ("{x: {function: os.system}}", 'tools.x.function: must look like "module.path:function"'),
        ("{x: {}}", "tools.x.function: required"),
        ("{x: null}", "tools.x: must be a mapping with function, got null"),
        ("{x: {function: 'a:b', timeout: 3}}", "tools.x.timeout: unknown key"),
        ("{x: {function: 'a:b', timeoutSeconds: 0}}", "tools.x.timeoutSeconds: must be"),
        ("{x: {function: 'a:b', timeoutSeconds: 7200}}", "tools.x.timeoutSeconds: must be"),
        ("{'bad name': {function: 'a:b'}}", "tools.bad name: invalid tool name"),
        ("[a]", "tools: must be a mapping"),
    ],
)
def test_a_bad_tools_section_names_the_yaml_path(tools: str, expected: str) -> None:
    found = problems(f"tools: {tools}\n")
    assert any(p.startswith(expected) for p in found), found


def test_an_app_yaml_workflow_names_a_declared_tool_or_its_own_function() -> None:
    config = parse(
        TOOLS
        + """
workflows:
  w:
    nodes:
      - {id: a, type: tool, tool: normalize}
      - {id: b, type: tool, function: "myco.tools:anything"}
"""
    )
    a, b = config.workflows["w"].nodes
    assert (a.tool, a.function) == ("normalize", None)
    assert (b.tool, b.function) == (None, "myco.tools:anything")  # the operator's own
    assert problems(TOOLS + "workflows: {w: {nodes: [{id: a, type: tool, tool: normalise}]}}") == [
        'workflows.w.nodes[0].tool: unknown tool "normalise": app.yaml\'s tools: declares '
        "normalize, slow (did you mean normalize?)"
    ]


def test_a_tool_node_names_one_of_tool_and_function() -> None:
    both = {"id": "a", "type": "tool", "tool": "normalize", "function": "m:f"}
    neither = {"id": "a", "type": "tool"}
    assert stored_problems(both) == [
        "nodes[0].function: a tool node names either tool or function, not both"
    ]
    assert stored_problems(neither)[0].startswith("nodes[0].tool: required for tool nodes")


@pytest.mark.parametrize(
    "function",
    [
        "subprocess:getoutput",
        "os:system",
        "builtins:eval",
        "tests.support.tools:slow_async",  # importable, but not declared
        "myco.undeclared:run",
    ],
)
def test_a_stored_workflow_may_not_name_an_undeclared_function(function: str) -> None:
    node = {"id": "x", "type": "tool", "function": function, "args": {"cmd": "id"}}
    assert stored_problems(NOTE, node) == [
        f'nodes[1].function: "{function}" is not a tool app.yaml declares; a stored workflow '
        "may run only the tools: of app.yaml (normalize, slow), named with tool: <name>"
    ]


def test_a_stored_workflow_may_name_declared_tools() -> None:
    config = parse(TOOLS)
    nodes = [
        {"id": "a", "type": "tool", "tool": "normalize", "args": {"x": 1}},
        {"id": "b", "type": "tool", "function": "tests.support.tools:slow"},  # as declared
    ]
    workflow = config.validate_workflow("w", {"name": "w", "nodes": nodes})
    assert [(n.tool, n.function) for n in workflow.nodes] == [
        ("normalize", None),
        (None, "tests.support.tools:slow"),
    ]


def test_a_stored_workflow_names_only_declared_tools_connectors_and_webhooks() -> None:
    assert stored_problems(
        {"id": "a", "type": "tool", "tool": "shell"},
        {"id": "b", "type": "connector", "connector": "call:demo-ledger", "action": "note"},
        {"id": "c", "type": "approval", "channels": ["webhook:audit", "webhook:evil"]},
        {"id": "d", "type": "workflow", "workflow": "elsewhere"},
    ) == [
        'nodes[0].tool: unknown tool "shell": app.yaml\'s tools: declares normalize, slow',
        'nodes[1].connector: unknown connector "call:demo-ledger" (did you mean demo-ledger?)',
        'nodes[2].channels[1]: unknown webhook "evil"',
        'nodes[3].workflow: unknown workflow "elsewhere"',
    ]


def test_without_tools_a_stored_workflow_runs_no_python_at_all() -> None:
    config = parse("")
    node = {"id": "x", "type": "tool", "function": "os:system"}
    with pytest.raises(ConfigError) as caught:
        config.validate_workflow("w", {"name": "w", "nodes": [node]})
    assert caught.value.problems == [
        'nodes[0].function: "os:system" is not a tool app.yaml declares; a stored workflow may '
        "run only the tools: of app.yaml (none), named with tool: <name>"
    ]
