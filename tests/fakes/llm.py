"""A fake OpenAI-compatible chat-completions server: real aiohttp on 127.0.0.1, port 0.

It answers ``POST /v1/chat/completions`` the way OpenAI, vLLM, Ollama and llama.cpp do, and it
refuses what they refuse: a missing or wrong bearer key (when it has one), a body without
``model`` or ``messages``. Each request takes the next scripted ``Reply`` (then ``default``):
an answer text, a delay, an HTTP error with headers (``Retry-After``), or a raw body that is not
JSON at all. Every request is recorded, with the peak number answered at once, so tests can
see that samples really ran concurrently.

    async with FakeLlm() as llm:
        llm.script("YES", "NO", Reply(status=503, headers={"Retry-After": "1"}))
        sampler = OpenAICompatibleSampler(llm.base_url, "fake-model")
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Reply:
    text: str = "YES"
    status: int = 200
    delay: float = 0.0  # seconds before answering (the client may time out first)
    headers: dict[str, str] = field(default_factory=dict)
    raw: str | None = None  # a body sent as is, instead of a chat completion


@dataclass
class Seen:
    """One request as received."""

    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def prompt(self) -> str:
        return "\n".join(m["content"] for m in self.body["messages"])


class FakeLlm:
    def __init__(self, *, api_key: str | None = None, model: str = "fake-model") -> None:
        self.api_key = api_key
        self.model = model
        self.default = Reply("YES")
        self.requests: list[Seen] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self._script: deque[Reply] = deque()
        self._runner: web.AppRunner | None = None
        self.port = 0

    def script(self, *replies: Reply | str) -> None:
        """Queue replies for the next requests, in arrival order."""
        self._script.extend(Reply(r) if isinstance(r, str) else r for r in replies)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FakeLlm:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        # handler_cancellation: a client that timed out and hung up stops the slow handler,
        # so closing the fake does not wait for answers nobody will read.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        if self.api_key is not None and request.headers.get("Authorization") != (
            f"Bearer {self.api_key}"
        ):
            return _error(401, "invalid_api_key", "Incorrect API key provided")
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "invalid_request_error", "body is not JSON")
        if not isinstance(body, dict) or "model" not in body or not body.get("messages"):
            return _error(400, "invalid_request_error", "model and messages are required")
        if body["model"] != self.model:
            return _error(404, "model_not_found", f"The model {body['model']} does not exist")
        self.requests.append(Seen(body, dict(request.headers)))
        reply = self._script.popleft() if self._script else self.default
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if reply.delay:
                await asyncio.sleep(reply.delay)  # a slow model: real latency over HTTP
        finally:
            self.in_flight -= 1
        if reply.raw is not None:
            return web.Response(
                text=reply.raw,
                status=reply.status,
                headers=reply.headers,
                content_type="application/json",
            )
        if reply.status >= 400:
            return _error(reply.status, "server_error", reply.text, reply.headers)
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
            headers=reply.headers,
        )


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": code, "code": code}},
        status=status,
        headers=headers or {},
    )
