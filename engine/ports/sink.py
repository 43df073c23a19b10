"""Where the outbox's messages go: one ``Sink`` per platform (Slack, Teams, webhooks,
callbacks), and the error a sink raises to ask for a retry or to give up."""

from __future__ import annotations

from typing import Protocol

from engine.domain.model import OutboxRecord


class DeliveryError(Exception):
    def __init__(
        self, message: str, *, retry_after: float | None = None, permanent: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.permanent = permanent


class Sink(Protocol):
    """Delivers one message to one platform."""

    min_interval: float  # seconds between two messages to the same channel

    async def deliver(self, message: OutboxRecord) -> None: ...
