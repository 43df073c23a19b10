"""The OpenAI-compatible client against a fake server: URLs, keys, retries, timeouts."""

from __future__ import annotations

import email.utils
from datetime import timedelta

import pytest

from engine.adapters.llm import OpenAICompatibleSampler, chat_completions_url
from engine.domain.errors import StepError
from engine.ports import ChatMessage
from tests.fakes.llm import FakeLlm, Reply
from tests.support.clock import ManualClock

HELLO = [ChatMessage("user", "hello")]


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com/v1/chat/completions"),
        ("https://api.openai.com/v1/", "https://api.openai.com/v1/chat/completions"),
        ("http://localhost:8080", "http://localhost:8080/v1/chat/completions"),  # llama.cpp
        ("http://localhost:11434/v1", "http://localhost:11434/v1/chat/completions"),  # Ollama
        ("https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1/chat/completions"),
        ("https://g.example/v1beta/openai/", "https://g.example/v1beta/openai/chat/completions"),
        ("http://vllm:8000/v1/chat/completions", "http://vllm:8000/v1/chat/completions"),
        ("http://proxy.example/llm", "http://proxy.example/llm/v1/chat/completions"),
    ],
)
def test_chat_completions_url(base, url):
    assert chat_completions_url(base) == url


class Waits:
    """An injected sleep that records how long the client asked to wait."""

    def __init__(self):
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


@pytest.fixture
async def llm():
    async with FakeLlm(api_key="sk-test") as server:
        yield server


def client(llm, **kw):
    return OpenAICompatibleSampler(llm.base_url, "fake-model", "sk-test", **kw)


async def test_complete_sends_the_openai_request(llm):
    llm.script("YES")
    sampler = client(llm)
    try:
        answer = await sampler.complete(HELLO, temperature=0.5, max_tokens=7)
    finally:
        await sampler.close()
    assert answer == "YES"
    (seen,) = llm.requests
    assert seen.headers["Authorization"] == "Bearer sk-test"
    assert seen.body["model"] == "fake-model"
    assert seen.body["messages"] == [{"role": "user", "content": "hello"}]
    assert seen.body["temperature"] == 0.5 and seen.body["max_tokens"] == 7


async def test_a_wrong_key_is_not_retried(llm):
    sampler = OpenAICompatibleSampler(llm.base_url, "fake-model", "wrong", max_retries=3)
    try:
        with pytest.raises(StepError) as caught:
            await sampler.complete(HELLO)
    finally:
        await sampler.close()
    assert not caught.value.retryable
    assert "401" in caught.value.message and "Incorrect API key" in caught.value.message
    assert llm.requests == []  # refused before it was counted


async def test_429_honours_retry_after(llm):
    waits = Waits()
    llm.script(Reply(status=429, headers={"Retry-After": "2"}), "NO")
    sampler = client(llm, max_retries=2, sleep=waits, max_retry_wait_seconds=5)
    try:
        assert await sampler.complete(HELLO) == "NO"
    finally:
        await sampler.close()
    assert waits.seconds == [2.0]
    assert len(llm.requests) == 2


async def test_retry_after_as_an_http_date_uses_the_injected_clock(llm):
    clock, waits = ManualClock(), Waits()
    when = email.utils.format_datetime(clock.now() + timedelta(seconds=3), usegmt=True)
    llm.script(Reply(status=503, headers={"Retry-After": when}), "YES")
    sampler = client(llm, sleep=waits, clock=clock, max_retry_wait_seconds=5)
    try:
        assert await sampler.complete(HELLO) == "YES"
    finally:
        await sampler.close()
    assert waits.seconds == [3.0]


async def test_5xx_is_retried_with_backoff_then_fails_retryable(llm):
    waits = Waits()
    llm.default = Reply("overloaded", status=503)
    sampler = client(llm, max_retries=2, sleep=waits)
    try:
        with pytest.raises(StepError) as caught:
            await sampler.complete(HELLO)
    finally:
        await sampler.close()
    assert caught.value.retryable and "503" in caught.value.message
    assert len(llm.requests) == 3 and waits.seconds == [0.25, 0.5]


async def test_a_retry_after_too_long_fails_at_once(llm):
    waits = Waits()
    llm.script(Reply(status=429, headers={"Retry-After": "120"}))
    sampler = client(llm, max_retries=2, sleep=waits, max_retry_wait_seconds=10)
    try:
        with pytest.raises(StepError) as caught:
            await sampler.complete(HELLO)
    finally:
        await sampler.close()
    assert caught.value.retryable and "Retry-After 120s" in caught.value.message
    assert waits.seconds == [] and len(llm.requests) == 1


async def test_a_timeout_is_not_retried(llm):
    llm.script(Reply("YES", delay=0.5))
    sampler = client(llm, timeout_seconds=0.1, max_retries=3)
    try:
        with pytest.raises(StepError) as caught:
            await sampler.complete(HELLO)
    finally:
        await sampler.close()
    assert caught.value.retryable and "0.1s" in caught.value.message
    assert len(llm.requests) == 1


@pytest.mark.parametrize("raw", ["not json at all", '{"choices": []}', '{"choices": [{}]}'])
async def test_a_garbage_body_is_a_step_error(llm, raw):
    llm.script(Reply(raw=raw))
    sampler = client(llm)
    try:
        with pytest.raises(StepError) as caught:
            await sampler.complete(HELLO)
    finally:
        await sampler.close()
    assert "unexpected response" in caught.value.message and not caught.value.retryable


async def test_unreachable_server_is_retryable():
    async with FakeLlm() as gone:
        url = gone.base_url
    sampler = OpenAICompatibleSampler(url, "fake-model", max_retries=0)
    try:
        with pytest.raises(StepError) as caught:
            await sampler.complete(HELLO)
    finally:
        await sampler.close()
    assert caught.value.retryable
