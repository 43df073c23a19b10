"""Outbound HTTP as the server makes it: the proxy chosen by curl's rules for every request,
and, for URLs that arrived through the API, internal addresses refused where the socket opens.

``client_session(proxies, ...)`` is the one way the engine and the front ends open an aiohttp
session to the outside. It never reads the environment (``trust_env`` is off: aiohttp would apply
``urllib``'s ``no_proxy`` rules, not curl's); a client middleware sets each request's proxy from
``engine.domain.proxies.ProxySettings``, overriding whatever a library asked for (slack_sdk reads
``HTTPS_PROXY`` itself and ignores ``NO_PROXY``).

``OutboundGuard`` adds the connect-time half of ``engine.domain.outbound``. Its connector hands
aiohttp a ``socket_factory``, which aiohappyeyeballs calls with the final address of every
connection aiohttp opens: a name's resolved addresses and an IP literal alike (aiohttp skips the
resolver for literals, and yarl has by then turned ``①②⑦.0.0.1`` into ``127.0.0.1``), so a URL
stored before a check existed, or a name resolving to loopback, gets no socket. The resolver
filters too, so a name with a public and an internal address still reaches the public one, and a
name with only internal ones fails with one clear ``RefusedTarget``. Through a proxy the socket
goes to the proxy (the operator's choice, reached whatever its address); the target host is then
checked before the request is sent: an address, or what the name resolves to here (when it does
not resolve here, the proxy resolves it and the check is the proxy's).
"""

from __future__ import annotations

import contextvars
import errno
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import aiohttp
from aiohappyeyeballs import AddrInfoType
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from engine.domain.outbound import IPAddress, IPNetwork, OutboundTargets
from engine.domain.proxies import ProxySettings

# Set while a request's connection goes to its proxy: the one socket then opened is the proxy's.
_VIA_PROXY: contextvars.ContextVar[bool] = contextvars.ContextVar("via_proxy", default=False)


class RefusedTarget(OSError):
    """An outbound request would reach an address that is not allowed; permanent."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EACCES, message)  # aiohttp shows an OSError's strerror


def client_session(
    proxies: ProxySettings,
    *,
    timeout: aiohttp.ClientTimeout | None = None,
    connector: aiohttp.BaseConnector | None = None,
    guard: OutboundGuard | None = None,
) -> aiohttp.ClientSession:
    """An aiohttp session whose every request goes through the proxy ``proxies`` choose for
    its URL (or directly). Open it inside the running event loop."""
    return aiohttp.ClientSession(
        timeout=timeout or aiohttp.ClientTimeout(total=30),
        connector=connector,
        trust_env=False,
        middlewares=(_ProxyChoice(proxies, guard),),
    )


class _ProxyChoice:
    """The client middleware that sets each request's proxy (``ProxySettings.proxy_for``)."""

    def __init__(self, proxies: ProxySettings, guard: OutboundGuard | None) -> None:
        self.proxies = proxies
        self.guard = guard

    async def __call__(
        self, req: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        chosen = self.proxies.proxy_for(str(req.url))
        if chosen is None:
            req.update_proxy(None, None, None)
            return await handler(req)
        req.update_proxy(URL(chosen), None, None)  # credentials in it become Proxy-Authorization
        if self.guard is not None:
            await self.guard.check_proxied_target(req)
        token = _VIA_PROXY.set(True)
        try:
            return await handler(req)
        finally:
            _VIA_PROXY.reset(token)


class OutboundGuard(OutboundTargets):
    """``OutboundTargets`` with the session and connector that apply them when a request is
    made."""

    def __init__(
        self,
        allow: Iterable[IPNetwork] = (),
        *,
        resolver: AbstractResolver | None = None,
        proxies: ProxySettings | None = None,
    ) -> None:
        super().__init__(allow)
        self.resolver = resolver  # None: aiohttp's default (tests give a fake DNS)
        self.proxies = proxies or ProxySettings()

    def connector(self) -> aiohttp.TCPConnector:
        """A connector whose every direct connection goes to a permitted address."""
        return aiohttp.TCPConnector(
            resolver=_GuardedResolver(self), use_dns_cache=False, socket_factory=self.open_socket
        )

    def session(self, *, timeout: aiohttp.ClientTimeout | None = None) -> aiohttp.ClientSession:
        """A session on ``connector()`` with the proxy choice, the target checked when the
        request goes through a proxy."""
        return client_session(self.proxies, timeout=timeout, connector=self.connector(), guard=self)

    def open_socket(self, addr_info: AddrInfoType) -> socket.socket:
        """aiohttp's ``socket_factory``: the socket for ``addr_info``, unless its address is
        refused (a connection to the configured proxy is the operator's and always allowed)."""
        family, type_, proto, _, sockaddr = addr_info
        if not _VIA_PROXY.get():
            address = _address(sockaddr[0])
            if not self.permits(address):
                raise RefusedTarget(f"{address} is an internal address: refused")
        return socket.socket(family=family, type=type_, proto=proto)

    async def check_proxied_target(self, req: aiohttp.ClientRequest) -> None:
        """Before a request goes to a proxy: its host as an address, or what the name resolves
        to here, must be permitted (ClientConnectorError with a RefusedTarget otherwise)."""
        host = req.url.raw_host or ""
        try:
            found = [ipaddress.ip_address(host.strip("[]").split("%", 1)[0])]
        except ValueError:
            inner = self.resolver or aiohttp.ThreadedResolver()
            try:
                entries = await inner.resolve(host, 0, socket.AF_UNSPEC)
                found = [_address(entry["host"]) for entry in entries]
            except OSError:
                return  # only the proxy can resolve it
            finally:
                if self.resolver is None:
                    await inner.close()
        refused = sorted({str(a) for a in found if not self.permits(a)})
        if refused:
            problem = RefusedTarget(
                f"{host} is an internal address ({', '.join(refused)}): refused"
            )
            raise aiohttp.ClientConnectorError(req.connection_key, problem)


class _GuardedResolver(AbstractResolver):
    """The default resolver, keeping only permitted addresses (none left: RefusedTarget). The
    proxy's own name is resolved as it is."""

    def __init__(self, guard: OutboundGuard) -> None:
        self.guard = guard
        self.inner = guard.resolver or aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self.inner.resolve(host, port, family)
        if _VIA_PROXY.get():
            return found
        kept = [entry for entry in found if self.guard.permits(_address(entry["host"]))]
        if not kept:
            shown = ", ".join(sorted({entry["host"] for entry in found}))
            raise RefusedTarget(f"{host} resolves to an internal address ({shown}): refused")
        return kept

    async def close(self) -> None:
        await self.inner.close()


def _address(host: Any) -> IPAddress:
    return ipaddress.ip_address(str(host).split("%", 1)[0])
