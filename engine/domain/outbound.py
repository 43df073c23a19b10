"""Outbound requests to addresses a caller chose: refused when they point inside the network.

An agent gives ``callbackUrl`` and the server POSTs to it, so without a guard an agent could make
the server call its own loopback, the cloud metadata service (169.254.169.254) or any private
host. The rule of which addresses are permitted lives here, pure; it is applied twice:

    OutboundTargets.check_url(url)   when the URL arrives: a literal internal address or
                                     ``localhost`` -> 400
    engine.adapters.outbound         when it is called: every address the name resolves to is
                                     checked at connect time (a name that resolves to 10.0.0.5
                                     today is refused, whatever it said when the URL was
                                     accepted); aiohttp skips the resolver for literal IPs, so
                                     ``check_url`` runs again before each request

Refused: loopback, private (RFC 1918, unique-local fc00::/7), link-local, shared (100.64/10),
multicast, reserved and unspecified addresses, IPv4-mapped IPv6 forms of them, and NAT64 forms.
``server.allowInternalTargets`` in app.yaml lists networks a deployment does want reached (an
internal receiver). URLs written in app.yaml itself (webhooks, connectors' ``baseUrl``) are the
operator's own choice and do not go through this guard.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from engine.domain.errors import InvalidRequest

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: not is_private everywhere
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAMES = ("localhost", "localhost.", "localhost.localdomain")


class OutboundTargets:
    """Which addresses the server may call for URLs that arrived through the API."""

    def __init__(self, allow: Iterable[IPNetwork] = ()) -> None:
        self.allow = tuple(allow)

    def permits(self, address: IPAddress) -> bool:
        """Whether ``address`` is public, or internal but on the allow-list."""
        if any(address in network for network in self.allow):
            return True
        return not is_internal(address)

    def check_url(self, url: str, what: str = "callbackUrl") -> None:
        """InvalidRequest when ``url`` names a literal internal address or a local name. A
        host name is left to the connect-time check, on what it resolves to."""
        try:
            host = urlsplit(url).hostname
        except ValueError as exc:
            raise InvalidRequest(f"{what} is not a valid URL: {exc}") from None
        if not host:
            raise InvalidRequest(f"{what} must name a host")
        host = host.lower()
        address = _literal(host)
        if address is not None:
            if not self.permits(address):
                raise InvalidRequest(_refusal(what, str(address)))
        elif host in _LOCAL_NAMES or host.endswith(".localhost"):
            if not self.permits(ipaddress.ip_address("127.0.0.1")):
                raise InvalidRequest(_refusal(what, host))


def is_internal(address: IPAddress) -> bool:
    """Whether ``address`` (or the IPv4 address a mapped, 6to4 or NAT64 form carries) is not
    on the public internet."""
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped or address.sixtofour
        if mapped is None and address in _NAT64:
            mapped = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if mapped is not None:
            return is_internal(mapped)
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or (isinstance(address, ipaddress.IPv4Address) and address in _SHARED)
    )


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _refusal(what: str, target: str) -> str:
    return (
        f"{what} points at an internal address ({target}); the server does not call those "
        "unless server.allowInternalTargets lists the network"
    )
