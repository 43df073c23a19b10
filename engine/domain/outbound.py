"""Outbound requests to addresses a caller chose: refused when they point inside the network.

An agent gives ``callbackUrl`` and the server POSTs to it, so without a guard an agent could make
the server call its own loopback, the cloud metadata service (169.254.169.254) or any private
host. The rule of which addresses are permitted lives here, pure; it is applied twice:

    OutboundTargets.check_url(url)   when the URL arrives: a literal internal address (in
                                     any form ``getaddrinfo`` reads: ``127.1``, ``0x7f.0.0.1``),
                                     ``localhost``, or a host the HTTP client would rewrite
                                     -> 400
    engine.adapters.outbound         when it is called: in the connector that opens the socket,
                                     on the address it is about to connect to (a name that
                                     resolves to 10.0.0.5 today is refused, whatever it said
                                     when the URL was accepted; an IP literal, which aiohttp
                                     never resolves, just the same)

A host is checked as the HTTP client will connect to it. yarl (under aiohttp) maps a Unicode
host through IDNA/UTS-46, which applies NFKC: circled digits (``①②⑦.0.0.1``), full-width
digits and ideographic full stops (U+3002) all become ``127.0.0.1``. So a host whose
normalised form differs from what was written is refused outright (``written_host_problem``):
a real internationalised name (``bücher.example``) is already in its normal form and passes;
what is left is checked as an address or name. The connect-time check needs none of this: it
sees the final address.

Refused: loopback, private (RFC 1918, unique-local fc00::/7), link-local, shared (100.64/10),
multicast, reserved and unspecified addresses, IPv4-mapped IPv6 forms of them, and NAT64 forms.
``server.allowInternalTargets`` in app.yaml lists networks a deployment does want reached (an
internal receiver). URLs written in app.yaml itself (webhooks, connectors' ``baseUrl``) are the
operator's own choice and do not go through this guard.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

import idna

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
        """InvalidRequest when ``url`` names a literal internal address or a local name, or a
        host the HTTP client would connect to under another name. A host name is left to the
        connect-time check, on what it resolves to."""
        try:
            host = urlsplit(url).hostname
        except ValueError as exc:
            raise InvalidRequest(f"{what} is not a valid URL: {exc}") from None
        if not host:
            raise InvalidRequest(f"{what} must name a host")
        host = host.lower()
        if (problem := written_host_problem(host)) is not None:
            raise InvalidRequest(f"{what} {problem}")
        address = _literal(host.removesuffix(".")) or legacy_ipv4(host.removesuffix("."))
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


def written_host_problem(host: str) -> str | None:
    """Why ``host`` (lower case, as ``urlsplit`` gives it) is not what the HTTP client would
    connect to, or None when it is. A Unicode host is put through both IDNA mappings an HTTP
    client may apply: UTS-46 (the ``idna`` package, which yarl and requests use first) and
    IDNA 2003 (the stdlib codec, yarl's fallback), both NFKC with every Unicode full stop read
    as a dot. It passes only if each mapping that accepts it gives it back as written: a
    host they rewrite (``①②⑦.0.0.1``), or on which they disagree (``faß.de``: ``fass.de`` to
    one, itself to the other), is refused, and so is one neither can encode."""
    if host.isascii():
        if "%" in host or any(ch.isspace() or not ch.isprintable() for ch in host):
            return f"has characters a host name cannot hold ({host!r})"
        return None
    normals: list[str] = []
    with contextlib.suppress(idna.IDNAError, UnicodeError):
        normals.append(idna.decode(idna.encode(host, uts46=True)))
    with contextlib.suppress(UnicodeError):
        normals.append(host.encode("idna").decode("idna"))
    if not normals:
        return f"names a host that cannot be encoded as a domain name ({host!r})"
    for normal in normals:
        if normal != host:
            return (
                f"names the host {host!r}, which IDNA/NFKC normalises to {normal!r}: an HTTP "
                "client would call another host than the one written; write it in its "
                "normal form"
            )
    return None


def legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The address ``getaddrinfo`` (``inet_aton``) reads in ``host`` when it is written in one
    of the old forms: ``127.1``, ``0x7f.0.0.1``, ``0177.0.0.1``, ``2130706433``; else None."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        try:
            if part[:2] in ("0x", "0X"):
                numbers.append(int(part[2:], 16))  # "0x" alone: not an address
            elif len(part) > 1 and part.startswith("0"):
                numbers.append(int(part, 8))
            else:
                numbers.append(int(part, 10) if part.isdigit() else -1)
        except ValueError:
            return None
    if any(n < 0 for n in numbers):
        return None
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (5 - len(numbers)):
        return None
    value = 0
    for n in leading:
        value = value * 256 + n
    value = value * 256 ** (5 - len(numbers)) + last
    return ipaddress.IPv4Address(value)


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
