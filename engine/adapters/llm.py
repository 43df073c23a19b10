"""The LLM client: OpenAI-compatible chat completions over aiohttp.

One ``POST`` per ``complete`` call, to the chat-completions endpoint of ``base_url``. The same
client serves OpenAI, vLLM, Ollama (``http://host:11434/v1``) and llama.cpp's server, so the
URL rule accepts each way people write that base URL:

    https://api.openai.com/v1            -> https://api.openai.com/v1/chat/completions
    http://localhost:8080                -> http://localhost:8080/v1/chat/completions
    https://host/v1beta/openai           -> https://host/v1beta/openai/chat/completions
    http://host/v1/chat/completions      -> used as is

(a path with a version segment, ``v1``, ``v1beta`` ..., already names the API; a bare host
gets ``/v1``, where every one of those servers mounts it).

Failures are ``StepError``: ``retryable=True`` for what may pass (timeouts, 429, 5xx, a dropped
connection), ``False`` for the rest (401, 404, a malformed answer). Within one call, 429 and 5xx
are retried up to ``max_retries`` times; ``Retry-After`` is honoured (never retried earlier),
and a ``Retry-After`` longer than ``max_retry_wait_seconds`` fails the call at once rather than
stalling the step that asked. A timeout is not retried: a server that is slow now is slow on the
next attempt too, and the confidence gate would rather divert the step than wait twice.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
from collections.abc import Awaitable, Callable
from datetime import UTC
from typing import Any

import aiohttp

from engine.adapters.clock import SystemClock
from engine.adapters.outbound import client_session
from engine.domain.errors import StepError
from engine.domain.proxies import ProxySettings
from engine.ports import ChatMessage, Clock

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_VERSION_SEGMENT = re.compile(r"v\d+[a-z0-9]*\Z")
_BACKOFF_SECONDS = 0.25


def chat_completions_url(base_url: str) -> str:
    """The chat-completions endpoint for ``base_url`` (see the module docstring)."""
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    path = base.partition("://")[2].partition("/")[2]
    if any(_VERSION_SEGMENT.match(segment) for segment in path.split("/")):
        return base + "/chat/completions"
    return base + "/v1/chat/completions"


class OpenAICompatibleSampler:
    """``engine.ports.Sampler`` over an OpenAI-compatible server. One session, opened on first
    use (it must be opened inside the running event loop), closed by ``close()``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout_seconds: float = 20.0,
        max_retries: int = 2,
        *,
        max_retry_wait_seconds: float | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Clock | None = None,
        proxies: ProxySettings | None = None,
    ) -> None:
        self.url = chat_completions_url(base_url)
        self.model = model
        self.api_key = api_key
        self.timeout_seconds = timeout_seconds
        self.max_retries = max(0, max_retries)
        self.max_retry_wait_seconds = (
            timeout_seconds if max_retry_wait_seconds is None else max_retry_wait_seconds
        )
        self._sleep = sleep  # injected so tests can see the waits without waiting
        self._clock = clock or SystemClock()  # for a Retry-After given as an HTTP date
        self.proxies = proxies or ProxySettings()  # curl's rules, from the app factory's env
        self._session: aiohttp.ClientSession | None = None

    async def complete(
        self, messages: list[ChatMessage], *, temperature: float = 1.0, max_tokens: int = 256
    ) -> str:
        body = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": temperature,
            "max_tokens": max_tokens,
            "stream": False,
        }
        attempt = 0
        while True:
            status, headers, payload, text = await self._post(body)
            if status < 400:
                return _content(payload, text)
            retryable = status in _RETRY_STATUSES
            message = f"LLM: HTTP {status}: {_error_text(payload, text)}"
            if not retryable or attempt >= self.max_retries:
                raise StepError(message, retryable=retryable, status=status)
            wait = _retry_after(headers.get("Retry-After"), self._clock)
            if wait is None:
                wait = _BACKOFF_SECONDS * 2**attempt
            elif wait > self.max_retry_wait_seconds:
                raise StepError(
                    f"{message} (Retry-After {wait:g}s is longer than this call may wait)",
                    retryable=True,
                    status=status,
                )
            attempt += 1
            await self._sleep(wait)

    async def _post(self, body: dict[str, Any]) -> tuple[int, dict[str, str], Any, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            async with self._session_for_loop().post(self.url, json=body, headers=headers) as resp:
                text = await resp.text()
                payload: Any = None
                if "json" in (resp.content_type or ""):
                    try:
                        payload = await resp.json(content_type=None)
                    except ValueError:
                        payload = None
                return resp.status, dict(resp.headers), payload, text
        except TimeoutError as exc:
            raise StepError(
                f"LLM: no answer within {self.timeout_seconds:g}s", retryable=True
            ) from exc
        except aiohttp.ClientError as exc:
            raise StepError(f"LLM: {type(exc).__name__}: {exc}", retryable=True) from exc

    def _session_for_loop(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = client_session(
                self.proxies, timeout=aiohttp.ClientTimeout(total=self.timeout_seconds)
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _content(payload: Any, text: str) -> str:
    """``choices[0].message.content``; some servers send content as a list of text parts."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise StepError(f"LLM: unexpected response: {text[:300]}") from None
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if not isinstance(content, str):
        raise StepError(f"LLM: unexpected response: {text[:300]}")
    return content


def _error_text(payload: Any, text: str) -> str:
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
    return text[:300]


def _retry_after(value: str | None, clock: Clock) -> float | None:
    """Seconds to wait per a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - clock.now()).total_seconds())
