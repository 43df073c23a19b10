"""``/openapi.json`` says what the server accepts (issue 29, item 10).

A body the published schema allows is either accepted or refused only for what no JSON Schema
can say (graph and reference rules, templates): the parser finds no shape problem in it. A body
the server refuses for its shape, the published schema refuses too.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from jsonschema import Draft202012Validator

from bot.api import route_tables
from bot.api.bodies import whole_numbers
from bot.api.openapi import document
from engine.config.workflow_schema import WORKFLOW_BODY
from engine.config.workflows import parse_workflow

DOCUMENT = document([route for table in route_tables() for route in table.routes])

# What parse_workflow may still say about a schema-valid workflow: the rules between nodes and
# inside templates. Anything else (a type, a pattern, a bound, a key) the schema must refuse.
SEMANTIC = re.compile(
    r": (duplicate id |no node has id |creates a cycle: |must be less than timeoutMinutes "
    r"|is \d+ but the approvers are only |expression limit: |invalid expression: )"
)


def published(path: str, method: str) -> Draft202012Validator:
    """A validator of the request body of ``method path`` as ``/openapi.json`` publishes it."""
    body = DOCUMENT["paths"][path][method]["requestBody"]["content"]["application/json"]
    return Draft202012Validator({**body["schema"], "components": DOCUMENT["components"]})


WORKFLOW = published("/v1/workflows", "post")
GATE = published("/v1/gate", "patch")
APPROVAL = {"id": "ask", "type": "approval"}


@pytest.mark.parametrize(
    "nodes",
    [
        [{"": {}}],  # found by schemathesis: an empty key, no id, no type
        [{}],
        [{"id": "", "type": "approval"}],
        [{"id": "end", "type": "approval"}],
        [{"id": "a b", "type": "approval"}],
        [{"id": "a", "type": "teleport"}],
        [{"id": "a", "type": "tool"}],  # no function
        [{"id": "a", "type": "tool", "function": "os.system"}],  # no module:function
        [{"id": "a", "type": "connector", "connector": "c"}],  # no action
        [{**APPROVAL, "function": "m:f"}],  # a tool's key on an approval
        [{**APPROVAL, "timeoutMinutes": 2000}],
        [{**APPROVAL, "timeoutMinutes": 0}],
        [{**APPROVAL, "timeoutMinutes": 1.5}],
        [{**APPROVAL, "approvalsRequired": 0}],
        [{**APPROVAL, "approvers": ["ann", "ann"]}],
        [{**APPROVAL, "approvers": [""]}],
        [{**APPROVAL, "channels": ["slack:general"]}],
        [{**APPROVAL, "channels": ["teams: "]}],
        [{**APPROVAL, "channels": ["web\n"]}],
        [{**APPROVAL, "escalateAfterMinutes": 5}],  # without escalateTo
        [{**APPROVAL, "escalateTo": ["ann"]}],  # without escalateAfterMinutes
        [{**APPROVAL, "onDeny": "end"}],
        [{**APPROVAL, "next": ""}],
        [{**APPROVAL, "reason": ""}],
        [{**APPROVAL, "denyReasonRequired": "yes"}],
        [{"id": "a", "type": "tool", "function": "m:f", "args": []}],
        [],
    ],
)
def test_the_schema_refuses_what_the_parser_refuses(nodes: list[Any]) -> None:
    body = {"name": "w", "nodes": nodes}
    _, problems = parse_workflow("w", body)
    assert problems, body
    assert not WORKFLOW.is_valid(body), body


@pytest.mark.parametrize("name", ["", "-w", "w" * 101, "w\n", "w w", "é"])
def test_the_schema_refuses_the_workflow_names_the_parser_refuses(name: str) -> None:
    body = {"name": name, "nodes": [APPROVAL]}
    assert parse_workflow(name, body)[1]
    assert not WORKFLOW.is_valid(body)


def test_a_workflow_the_parser_accepts_is_valid() -> None:
    nodes = [
        {"id": "run", "type": "tool", "function": "pkg.mod:fn", "args": {"n": 1}, "next": "ask"},
        {
            **APPROVAL,
            "approvers": ["ann", "bob"],
            "approvalsRequired": 2,
            "channels": ["web", "slack:C0123ABCD", "teams:Ops room", "webhook:ops"],
            "timeoutMinutes": 60,
            "remindBeforeMinutes": 10,
            "escalateAfterMinutes": 30,
            "escalateTo": ["cat"],
            "next": "end",
        },
    ]
    body = {"name": "w.1", "nodes": nodes}
    assert parse_workflow("w.1", body)[1] == []
    assert WORKFLOW.is_valid(body), list(WORKFLOW.iter_errors(body))


@pytest.mark.parametrize("samples", [9.6e30, -9.6e30, 2.5, "5"])
def test_the_gate_schema_bounds_samples(samples: object) -> None:
    """schemathesis found ``samples: 9.6e30`` valid in the document and refused by the server."""
    assert not GATE.is_valid({"samples": samples})


def test_the_gate_schema_allows_the_samples_the_gate_takes() -> None:
    """Whole numbers outside 1..9 are taken with a warning (engine.gate.settings), 5.0 as 5."""
    assert all(GATE.is_valid({"samples": n}) for n in (-1, 0, 1, 5, 5.0, 9, 10, 2**63 - 1))


@pytest.mark.parametrize("number", [1e19, -1e19, 10**19])
def test_free_form_values_are_bounded_like_the_json_reader(number: float) -> None:
    """A run's input takes any JSON value, within the numbers engine.json_input reads."""
    runs = published("/v1/runs", "post")
    assert not runs.is_valid({"workflow": "w", "input": {"n": number}})


WORKFLOW_CASES = schemathesis.openapi.from_dict(DOCUMENT)["/v1/workflows"]["POST"].as_strategy()


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(case=WORKFLOW_CASES)
def test_a_schema_valid_workflow_breaks_only_rules_no_schema_says(case: schemathesis.Case) -> None:
    """What schemathesis's positive_data_acceptance asks of the server, without a server: the
    parser finds no shape problem in any body the published schema allows."""
    body = case.body
    assert WORKFLOW.is_valid(body)
    body = whole_numbers(WORKFLOW_BODY, body)  # as bot.api.bodies.read_body hands it on
    _, problems = parse_workflow(body["name"], body)
    shape = [p for p in problems if not SEMANTIC.search(p)]
    assert not shape, (body, shape)
