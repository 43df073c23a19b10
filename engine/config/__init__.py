"""``app.yaml`` into one frozen ``AppConfig``, loaded once at the app factory.

Nothing else in Signoff reads ``os.environ``: the caller hands ``env`` in, and the loader applies
``${VAR}`` substitution and the ``SIGNOFF_*`` overrides (database URL, host, port, public URL,
secret key) and keeps the raw confidence-gate variables in ``gate_env`` (they are resolved
env -> ``app.yaml`` -> runtime overrides by the gate). A bad file raises ``ConfigError`` listing
every problem, each line starting with the YAML path of the bad key, malformed policy rules
included. Malformed rules alone do not fail the load (see ``engine.config.policies``); they are
listed in ``rule_problems``.

The package's modules: ``loading`` (``load_config``, ``parse_config``), ``app`` (the
``AppConfig`` record), ``sections`` (database, server, people, gate ...), ``channels`` (what
it knows of each channel: addresses, ``people:`` ids, each one's own section), ``connectors``,
``policies`` (rules), ``workflows`` (workflow definitions), ``values`` (value readers and
``${VAR}`` substitution) and ``yaml_text`` (strict YAML). The records and enums of policy and
the gate are the domain's (``engine.domain.policy_rules``, ``engine.domain.confidence``) and are
re-exported here for the callers that read them with the configuration.
"""

from __future__ import annotations

from engine.config.app import AppConfig
from engine.config.connectors import ActionConfig, ConnectorConfig, ConnectorType
from engine.config.loading import load_config, parse_config
from engine.config.sections import (
    GATE_ENV,
    ApprovalsConfig,
    DatabaseConfig,
    GateConfig,
    LlmConfig,
    Person,
    PolicyConfig,
    ServerConfig,
    normalize_database_url,
)
from engine.domain.confidence import Estimator
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
    "load_config",
    "normalize_database_url",
    "parse_config",
]
