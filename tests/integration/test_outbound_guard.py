"""The connect-time half of the outbound guard (issue 29 item 2): whatever path a URL took, the
connector that opens the socket refuses an internal address, IP literals included (aiohttp
never resolves those). Through a proxy: ``test_proxy_routing``."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver
from aiohttp.test_utils import TestServer

from engine.adapters.outbound import OutboundGuard, RefusedTarget

LOOPBACK = [ipaddress.ip_network("127.0.0.1/32")]


class Receiver:
    """A loopback HTTP server recording every POST it gets."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        self.server = TestServer(app, host="127.0.0.1")

    async def _hook(self, request: web.Request) -> web.Response:
        self.received.append(await request.read())
        return web.Response(status=204)

    @property
    def port(self) -> int:
        port = self.server.port
        assert port is not None
        return port


class LoopbackDns(AbstractResolver):
    """Resolves every name to 127.0.0.1, as a name an agent controls could."""

    async def resolve(self, host, port=0, family=socket.AF_INET):
        return [
            {
                "hostname": host,
                "host": "127.0.0.1",
                "port": port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self):
        pass


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    await receiver.server.start_server()
    yield receiver
    await receiver.server.close()


async def post(session: aiohttp.ClientSession, url: str) -> int:
    async with session.post(url, data=b"{}", allow_redirects=False) as resp:
        return resp.status


@pytest.mark.parametrize("host", ["127.0.0.1", "①②⑦.0.0.1", "127。0。0。1", "[::ffff:127.0.0.1]"])
async def test_the_connector_refuses_an_internal_literal_whatever_its_spelling(
    receiver: Receiver, host: str
) -> None:
    """A URL that never went through ``check_url`` (stored before the check existed, say) is
    refused where the socket opens; yarl has by then made ``127.0.0.1`` of the Unicode forms."""
    guard = OutboundGuard()
    async with aiohttp.ClientSession(connector=guard.connector()) as session:
        with pytest.raises(aiohttp.ClientConnectorError) as caught:
            await post(session, f"http://{host}:{receiver.port}/hook")
    assert isinstance(caught.value.os_error, RefusedTarget), caught.value
    assert receiver.received == []


async def test_an_allow_listed_literal_is_reached(receiver: Receiver) -> None:
    async with aiohttp.ClientSession(connector=OutboundGuard(LOOPBACK).connector()) as session:
        assert await post(session, f"http://127.0.0.1:{receiver.port}/hook") == 204
    assert receiver.received == [b"{}"]


async def test_a_name_resolving_to_loopback_is_refused_directly(receiver: Receiver) -> None:
    connector = OutboundGuard(resolver=LoopbackDns()).connector()
    async with aiohttp.ClientSession(connector=connector) as session:
        with pytest.raises(aiohttp.ClientConnectorError) as caught:
            await post(session, f"http://hooks.agent.example:{receiver.port}/hook")
    assert isinstance(caught.value.os_error, RefusedTarget)
    assert receiver.received == []
