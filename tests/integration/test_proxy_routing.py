"""Issue 29 item 12: every outbound client takes the proxy that curl's rules choose, against a
real local proxy that records where each request was going (``tests.fakes.proxy``).

The environment is set for the process too (``monkeypatch.setenv``), as in a deployment: that
is what slack_sdk read by itself, ``NO_PROXY`` unread, so that replies to 127.0.0.1 went to the
proxy although ``NO_PROXY`` listed it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from bot.app import create_app
from bot.keys import ENGINE
from engine.adapters.outbound import OutboundGuard, RefusedTarget
from engine.assembly import EngineOptions
from engine.config import parse_config
from engine.domain.model import Role
from engine.domain.proxies import ProxySettings
from engine.ports import ChatMessage
from tests.fakes.llm import FakeLlm
from tests.fakes.proxy import RecordingProxy
from tests.fakes.slack import FakeSlack
from tests.integration.slack.harness import USERS, SlackHarness, config_text
from tests.integration.slack.test_slack_clicks import FLOWS
from tests.integration.test_outbound_guard import LOOPBACK, LoopbackDns, Receiver, post
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import wait_for
from tests.support.ids import SequentialIds

NAMES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


@pytest.fixture
async def proxy() -> AsyncIterator[RecordingProxy]:
    async with RecordingProxy() as proxy:
        yield proxy


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    await receiver.server.start_server()
    yield receiver
    await receiver.server.close()


def proxy_env(
    monkeypatch: pytest.MonkeyPatch, proxy: RecordingProxy, no_proxy: str
) -> dict[str, str]:
    """Every proxy variable at ``proxy``, ``NO_PROXY`` as given: in the process and returned."""
    env = {name: proxy.url for name in NAMES} | {"NO_PROXY": no_proxy, "no_proxy": no_proxy}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.mark.parametrize(
    ("no_proxy", "through_proxy"),
    [("127.0.0.1", False), ("localhost,127.0.0.0/8", False), ("slack.com", True)],
)
async def test_slack_calls_and_replies_take_the_proxy_curl_would(
    migrated_db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    proxy: RecordingProxy,
    no_proxy: str,
    through_proxy: bool,
) -> None:
    """A card (Web API) and a refusal told through ``response_url``, both to a fake Slack on
    127.0.0.1: directly when ``NO_PROXY`` covers it, else through the proxy."""
    env = proxy_env(monkeypatch, proxy, no_proxy)
    async with FakeSlack() as slack:
        options = EngineOptions(clock=ManualClock(), ids=SequentialIds("id"), owner="proxy")
        app = create_app(parse_config(config_text(migrated_db_url, slack, FLOWS), env), options)
        client = TestClient(TestServer(app))
        await client.start_server()
        try:
            api = Api(client, app[ENGINE], {})
            await api.token("agent", Role.AGENT)
            h = SlackHarness(api, slack)
            run_id = await h.start("refund", {"order": "P-1"})
            request = await h.request_of(run_id)

            async def card_posted() -> list:
                return slack.calls_of("chat.postMessage", ok=True)

            await wait_for(card_posted)
            status, key = await h.click(USERS["dave"], "signoff_grant", request.id)
            assert status == 200
            assert (await h.wait_told(key)).startswith("You are not an approver")
        finally:
            await client.close()
    fake = slack.url.removeprefix("http://").rstrip("/")
    if through_proxy:
        assert fake in proxy.seen and len(proxy.seen) >= 2, proxy.seen
        assert set(proxy.seen) == {fake}
    else:
        assert proxy.seen == []


async def test_the_llm_client_takes_the_proxy_curl_would(
    monkeypatch: pytest.MonkeyPatch, proxy: RecordingProxy
) -> None:
    from engine.adapters.llm import OpenAICompatibleSampler

    async with FakeLlm() as llm:
        llm.script("YES", "YES")
        for no_proxy, expected in (("127.0.0.1", 0), ("example.com", 1)):
            proxies = ProxySettings.from_env(proxy_env(monkeypatch, proxy, no_proxy))
            sampler = OpenAICompatibleSampler(llm.base_url, "fake-model", proxies=proxies)
            try:
                await sampler.complete([ChatMessage("user", "ok?")])
            finally:
                await sampler.close()
            assert len(proxy.seen) == expected, proxy.seen


@pytest.mark.parametrize("target", ["127.0.0.1", "hooks.agent.example"])
async def test_through_a_proxy_an_internal_target_is_refused_before_the_proxy_sees_it(
    receiver: Receiver, proxy: RecordingProxy, target: str
) -> None:
    """The socket then goes to the proxy (allowed: the operator's); the target is checked as an
    address, or on what its name resolves to here."""
    proxies = ProxySettings(http_proxy=proxy.url)
    guard = OutboundGuard(resolver=LoopbackDns(), proxies=proxies)
    async with guard.session() as session:
        with pytest.raises(aiohttp.ClientConnectorError) as caught:
            await post(session, f"http://{target}:{receiver.port}/hook")
    assert isinstance(caught.value.os_error, RefusedTarget)
    assert proxy.seen == [] and receiver.received == []


async def test_an_allow_listed_target_goes_through_the_proxy(
    receiver: Receiver, proxy: RecordingProxy
) -> None:
    guard = OutboundGuard(LOOPBACK, proxies=ProxySettings(http_proxy=proxy.url))
    async with guard.session() as session:
        assert await post(session, f"http://127.0.0.1:{receiver.port}/hook") == 204
    assert proxy.seen == [f"127.0.0.1:{receiver.port}"]
    assert receiver.received == [b"{}"]


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "127.0.0.0/8", "*", "localhost, 127.0.0.1"])
async def test_no_proxy_sends_it_directly(
    receiver: Receiver, proxy: RecordingProxy, no_proxy: str
) -> None:
    proxies = ProxySettings(http_proxy=proxy.url, no_proxy=no_proxy)
    async with OutboundGuard(LOOPBACK, proxies=proxies).session() as session:
        assert await post(session, f"http://127.0.0.1:{receiver.port}/hook") == 204
    assert proxy.seen == []
    assert receiver.received == [b"{}"]
