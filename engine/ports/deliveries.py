"""The store as the outbound sinks see it (``engine.adapters.callbacks``, and a front end's,
``bot.webhook.sink``): they read the run and the request a message is about, as things stand
at delivery, and nothing else. ``SqlStore`` satisfies both protocols structurally;
``engine.assembly`` hands it over."""

from __future__ import annotations

from typing import Protocol

from engine.domain.model import Run, TakeoverRequest


class CallbackReads(Protocol):
    """What ``engine.adapters.callbacks.CallbackSink`` reads: the held call's run and request."""

    async def get_run(self, run_id: str) -> Run: ...

    async def call_request(self, run_id: str) -> TakeoverRequest | None: ...


class RequestReads(Protocol):
    """What a sink posting a request's current state reads (``bot.webhook.sink``): the request
    and its run."""

    async def get_takeover(self, request_id: str) -> TakeoverRequest: ...

    async def get_run(self, run_id: str) -> Run: ...
