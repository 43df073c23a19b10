"""One table of connector types: what ``type:`` accepts is what the engine builds."""

from __future__ import annotations

import textwrap

import pytest

from engine.adapters.connectors.builders import CONNECTOR_BUILDERS
from engine.config import ConnectorType, parse_config
from engine.domain.errors import ConfigError


def test_every_type_the_config_accepts_has_a_builder() -> None:
    assert set(CONNECTOR_BUILDERS) == set(ConnectorType)


def test_slack_message_is_not_a_connector_type() -> None:
    text = """
    connectors:
      notify: {type: slack-message}
    """
    with pytest.raises(ConfigError) as caught:
        parse_config(textwrap.dedent(text), {}, "test.yaml")
    assert caught.value.problems == [
        'connectors.notify.type: must be one of http, python, demo-ledger, got "slack-message"'
    ]
