"""The one parser for JSON from outside refuses what the databases and clients cannot take."""

from __future__ import annotations

import json

import pytest

from engine.domain.errors import InvalidRequest
from engine.domain.json_input import MAX_DEPTH, check_text, check_value, parse_json


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ('{"amount": NaN}', "NaN"),
        ('{"amount": Infinity}', "Infinity"),
        ('{"amount": -Infinity}', "-Infinity"),
        ('{"amount": 1e400}', "too large"),
        ('{"n": ' + "9" * 5000 + "}", "integer outside"),
        ('{"n": 9223372036854775808}', "integer outside"),
        ('{"n": 1e19}', "number outside"),  # JSON Schema's "maximum" cannot tell the two apart
        ('{"n": -9.3e18}', "number outside"),
        ("[" * 10_000 + "]" * 10_000, "nested more than"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested more than"),
        ('{"key": "a\\u0000b"}', "NUL"),
        ('{"a\\u0000": 1}', "NUL"),
        ('{"s": "\\ud800"}', "lone surrogate"),
        ("{not json", "not valid JSON"),
    ],
)
def test_refused_input_says_why(raw: str, says: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_json(raw.encode())
    assert says in caught.value.message


def test_ordinary_json_is_read_as_the_json_module_reads_it() -> None:
    raw = '{"a": [1, 2.5, -3, true, null, "é😀"], "b": {"c": 9223372036854775807}}'
    assert parse_json(raw) == json.loads(raw)
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(nested) == json.loads(nested)


def test_values_parsed_elsewhere_get_the_same_checks() -> None:
    with pytest.raises(InvalidRequest):
        check_value({"x": float("nan")})
    with pytest.raises(InvalidRequest):
        check_value({"x": [{"y": 10**30}]})
    check_value({"x": [1, "ok", None]})
    with pytest.raises(InvalidRequest):
        check_text("run\x00id", "path.id")
    assert check_text("run-1", "path.id") == "run-1"
