"""Where the outbox's messages go: one ``Sink`` per platform (Slack, Teams, webhooks,
callbacks). The error a sink raises to ask for a retry or to give up is
``engine.domain.errors.DeliveryError``."""

from __future__ import annotations

from typing import Protocol

from engine.domain.errors import DeliveryError
from engine.domain.model import OutboxRecord

__all__ = ["DeliveryError", "Sink"]  # the error is the domain's; sinks may name it here


class Sink(Protocol):
    """Delivers one message to one platform."""

    min_interval: float  # seconds between two messages to the same channel

    async def deliver(self, message: OutboxRecord) -> None: ...
