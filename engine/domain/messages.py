"""The plain records that cross the ports: a connector call, a chat message to the LLM, the
question the confidence gate is asked. They are data, so they live in the domain, and
``engine.ports`` names them in its protocols (ports may import the domain, never the reverse)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ConnectorCall:
    """One side-effecting call, with the idempotency key ``{run_id}:{step_id}:{attempt}``."""

    connector: str
    action: str
    args: Mapping[str, Any]
    idempotency_key: str
    run_id: str | None = None
    step_id: str | None = None
    account: str | None = None
    context: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str  # system, user, assistant
    content: str


@dataclass(frozen=True, slots=True)
class GateQuestion:
    """What the confidence gate is asked about one pending step."""

    run_id: str
    workflow: str
    agent: str | None
    step_id: str
    node_type: str
    connector: str | None
    action: str | None
    args: Any
    prior_outputs: Mapping[str, Any]
    requires_confidence: bool
    channels: tuple[str, ...]  # the step's own channels (may be empty)
    approvers: tuple[str, ...]  # the step's own approvers (may be empty)
