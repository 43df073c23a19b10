"""Workflow expressions: the author's ``{{ ... }}`` text is evaluated in a sandbox; values that
arrive in ``input`` or step outputs are data and are never rendered as templates."""

from __future__ import annotations

from typing import Any

import pytest

from engine.domain.errors import StepError
from engine.domain.expressions import check_template, evaluate, is_template, render_text
from engine.domain.prose import omit_empty

CONTEXT: dict[str, Any] = {
    "input": {
        "n": 7,
        "price": 12.5,
        "ok": True,
        "none": None,
        "items": [1, 2],
        "customer": {"name": "Ada"},
        "evil": "{{ 7*7 }}",
        "evil_block": "{% for x in range(3) %}x{% endfor %}",
        "evil_attr": "{{ cycler.__init__.__globals__ }}",
    },
    "steps": {"lookup": {"output": {"amount": 52.34, "currency": "EUR"}}},
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ input.n }}", 7),
        ("  {{ input.n }}  ", 7),
        ("{{ input.price }}", 12.5),
        ("{{ input.ok }}", True),
        ("{{ input.none }}", None),
        pytest.param("{{ input.items }}", [1, 2]),
        ("{{ input.customer }}", {"name": "Ada"}),
        ("{{ steps.lookup.output.amount }}", 52.34),
        ("{{ input.n * 2 }}", 14),
        ("{{ input.n > 5 }}", True),
    ],
)
def test_one_expression_keeps_its_type(template: str, expected: Any) -> None:
    value = evaluate(template, CONTEXT)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("n={{ input.n }}", "n=7"),
        ("{{ input.n }} {{ input.n }}", "7 7"),
        ("{{ input.customer.name }} pays {{ steps.lookup.output.amount }}", "Ada pays 52.34"),
        ("{% if input.ok %}yes{% endif %}", "yes"),
        ("plain text", "plain text"),
        ("", ""),
    ],
)
def test_text_with_expressions_renders_to_text(template: str, expected: str) -> None:
    assert evaluate(template, CONTEXT) == expected


@pytest.mark.parametrize("key", ["evil", "evil_block", "evil_attr"])
def test_input_values_are_data_never_templates(key: str) -> None:
    literal = CONTEXT["input"][key]
    assert evaluate("{{ input." + key + " }}", CONTEXT) == literal
    assert evaluate("said: {{ input." + key + " }}", CONTEXT) == "said: " + literal
    assert render_text("Reason: {{ input." + key + " }}", CONTEXT) == "Reason: " + literal


def test_step_outputs_are_data_too() -> None:
    context = {"input": {}, "steps": {"llm": {"output": {"text": "{{ 7*7 }}"}}}}
    assert evaluate("{{ steps.llm.output.text }}", context) == "{{ 7*7 }}"


def test_structures_are_evaluated_recursively() -> None:
    args = {
        "order": "{{ input.n }}",
        "lines": ["{{ input.price }}", "fixed", 3, {"who": "{{ input.customer.name }}"}],
        "flag": False,
        "nothing": None,
    }
    assert evaluate(args, CONTEXT) == {
        "order": 7,
        "lines": [12.5, "fixed", 3, {"who": "Ada"}],
        "flag": False,
        "nothing": None,
    }


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "x {{ ''.__class__ }}",
        "{{ cycler.__init__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ input.items.append(3) }}",  # immutable: no mutating the run's input
        "{{ input.customer.update({'name': 'Eve'}) }}",
        "{{ range(10**8) | list }}",
        "{{ input.__class__ }}",
    ],
)
def test_the_sandbox_refuses(template: str) -> None:
    with pytest.raises(StepError) as caught:
        evaluate(template, CONTEXT)
    assert template in caught.value.message
    assert CONTEXT["input"]["items"] == [1, 2]
    assert CONTEXT["input"]["customer"] == {"name": "Ada"}


@pytest.mark.parametrize(
    "template",
    ["{{ input.missing }}", "{{ nothing.here }}", "{{ 1 / 0 }}", "{{ input.n + 'x' }}"],
)
def test_a_failing_expression_is_a_step_error(template: str) -> None:
    with pytest.raises(StepError) as caught:
        evaluate(template, CONTEXT)
    assert template in caught.value.message
    assert not caught.value.retryable


def test_render_text_is_lenient_unless_strict() -> None:
    assert render_text("Refund {{ input.missing }}!", CONTEXT) == "Refund!"
    assert render_text("Refund {{ 1/0 }}", CONTEXT) == "Refund {{ 1/0 }}"
    assert "__class__" not in render_text("{{ ''.__class__ }}", CONTEXT)
    assert render_text("no template", CONTEXT) == "no template"
    with pytest.raises(StepError):
        render_text("Refund {{ input.missing }}", CONTEXT, strict=True)
    with pytest.raises(StepError):
        render_text("{{ ''.__class__ }}", CONTEXT, strict=True)


def test_syntax_check_and_detection() -> None:
    assert check_template("{{ input.n }}") is None
    assert check_template("plain") is None
    assert check_template("{{ input.n ") is not None
    assert check_template("{% if %}") is not None
    assert is_template("a {{ b }}") and is_template("{% if x %}{% endif %}")
    assert is_template("{# note #}")
    assert not is_template("a { b } c")


@pytest.mark.parametrize("key", ["items", "keys", "values", "get", "copy"])
def test_a_field_named_like_a_dict_method_is_the_field(key: str) -> None:
    context = {"input": {key: "the data"}}
    assert evaluate("{{ input." + key + " }}", context) == "the data"


@pytest.mark.parametrize(
    "source",
    [
        "input.n",
        "input.customer.name",
        "steps.lookup.output",
        "input.items",
        "input.evil",
        " input.none ",
        "true",
        "none",
        "False",
    ],
)
def test_a_dotted_path_reads_what_jinja_reads(source: str) -> None:
    """A plain dotted path is read without jinja; it must agree with jinja's reading."""
    from engine.domain.expressions import _expression

    assert evaluate("{{" + source + "}}", CONTEXT) == _expression(source)(**CONTEXT)


@pytest.mark.parametrize(
    ("template", "refusal"),
    [("{{ input.customer.name.upper }}", "not data"), ("{{ input.items.pop }}", "unsafe")],
)
def test_a_path_past_the_data_goes_to_jinja(template: str, refusal: str) -> None:
    """A name that is not a key (an attribute of a string, a list, a number) is jinja's to
    read, under the sandbox."""
    with pytest.raises(StepError, match=refusal):
        evaluate(template, CONTEXT)
    assert evaluate("{{ input.n.real }}", CONTEXT) == 7


@pytest.mark.parametrize(
    "template",
    [
        "act on {{ input.n }}",
        "{{ input.customer.name }} pays {{ steps.lookup.output.amount }} {{input.ok}}",
        "none: {{ input.none }}, items: {{ input.items }}, customer: {{ input.customer }}",
        "price {{ input.price }}\n",  # jinja drops the last newline
        "{{- input.n }} x",  # whitespace control
        "{{ input.missing }} and {{ input.n }}",  # lenient: jinja renders it empty
        "}} {{ input.n }}",
        "{{ input.evil }}",
    ],
)
def test_text_of_paths_renders_as_jinja_does(template: str) -> None:
    """Texts whose expressions are all paths are rendered without jinja; same text."""
    from engine.domain.expressions import _template

    jinja = omit_empty(_template(template, False).render(**CONTEXT))
    assert render_text(template, CONTEXT) == jinja
    if "missing" not in template:
        assert evaluate(template, CONTEXT) == _template(template, True).render(**CONTEXT)
