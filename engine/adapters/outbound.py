"""The connect-time half of ``engine.domain.outbound``: an aiohttp connector that refuses
internal addresses.

A URL's host name was checked when it arrived only if it was a literal address; what a name
resolves to is checked here, at every connection, so a name that resolves to 10.0.0.5 today is
refused whatever it said when the URL was accepted.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from engine.domain.outbound import IPAddress, IPNetwork, OutboundTargets


class RefusedTarget(OSError):
    """An outbound request would reach an address that is not allowed; permanent."""


class OutboundGuard(OutboundTargets):
    """``OutboundTargets`` with the connector that applies them when a request is made."""

    def __init__(
        self, allow: Iterable[IPNetwork] = (), *, resolver: AbstractResolver | None = None
    ) -> None:
        super().__init__(allow)
        self.resolver = resolver  # None: aiohttp's default (tests give a fake DNS)

    def connector(self) -> aiohttp.TCPConnector:
        """A connector whose every connection goes to a permitted address."""
        return aiohttp.TCPConnector(resolver=_GuardedResolver(self), use_dns_cache=False)


class _GuardedResolver(AbstractResolver):
    """The default resolver, keeping only permitted addresses (none left: RefusedTarget)."""

    def __init__(self, guard: OutboundGuard) -> None:
        self.guard = guard
        self.inner = guard.resolver or aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self.inner.resolve(host, port, family)
        kept = [entry for entry in found if self.guard.permits(_address(entry))]
        if not kept:
            shown = ", ".join(sorted({entry["host"] for entry in found}))
            raise RefusedTarget(f"{host} resolves to an internal address ({shown}): refused")
        return kept

    async def close(self) -> None:
        await self.inner.close()


def _address(entry: Any) -> IPAddress:
    return ipaddress.ip_address(str(entry["host"]).split("%", 1)[0])
