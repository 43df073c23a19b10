"""Which proxy an outbound request goes through: curl's rules, read once from the environment.

Every outbound client of the server (callbacks, webhooks, the HTTP connector, the LLM client,
Slack's Web API and ``response_url``, the Bot Connector) asks ``ProxySettings.proxy_for(url)``,
so ``NO_PROXY`` means the same thing everywhere, and what it means is what curl does
(https://curl.se/docs/manpage.html#--noproxy, ``lib/noproxy.c``; Python's ``urllib``, which
aiohttp's ``trust_env`` uses, and ``requests`` differ: no CIDR ranges, suffix matches that let
``ample.com`` cover ``example.com``):

* the variables: for an ``https`` URL ``https_proxy`` then ``HTTPS_PROXY``; for ``http`` only
  ``http_proxy`` (curl ignores ``HTTP_PROXY``: in CGI it is a request header, "httpoxy"); then
  ``all_proxy``, ``ALL_PROXY``. ``no_proxy`` before ``NO_PROXY``. A variable that is set, even
  empty, ends the search; a proxy written without a scheme is ``http://``.
* ``NO_PROXY`` is a list separated by commas or white space. A lone ``*`` matches every host.
  A name matches the host itself or any host under it (``example.com`` and ``.example.com``
  both cover ``example.com`` and ``www.example.com``, never ``notexample.com``); a trailing dot
  is ignored on both sides; case never matters. An IPv4 or IPv6 address, or a CIDR range
  (``10.0.0.0/8``, ``fd00::/8``), matches a host written as an address in it, never a name.
  Ports are ignored (on the URL, and on an entry written ``host:port``).

Nothing here reads ``os.environ``: ``from_env`` is handed the environment the app factory read.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

_SEPARATORS = re.compile(r"[,\s]+")


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """The proxy environment as the process started with it (None: the variable is unset)."""

    http_proxy: str | None = None
    https_proxy: str | None = None
    all_proxy: str | None = None
    no_proxy: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ProxySettings:
        """The settings curl would read from ``env`` (lower case first)."""

        def first(*names: str) -> str | None:
            return next((env[name] for name in names if name in env), None)

        return cls(
            http_proxy=first("http_proxy"),
            https_proxy=first("https_proxy", "HTTPS_PROXY"),
            all_proxy=first("all_proxy", "ALL_PROXY"),
            no_proxy=first("no_proxy", "NO_PROXY") or "",
        )

    @property
    def configured(self) -> bool:
        """Whether any proxy is set at all."""
        return any((self.http_proxy, self.https_proxy, self.all_proxy))

    def proxy_for(self, url: str) -> str | None:
        """The proxy URL for a request to ``url``, or None to connect directly."""
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError:
            return None
        scheme = parts.scheme.lower()
        if scheme == "https":
            chosen = self.https_proxy
        elif scheme == "http":
            chosen = self.http_proxy
        else:
            return None
        if chosen is None:
            chosen = self.all_proxy
        if not chosen or not host or bypasses(host, self.no_proxy):
            return None
        return chosen if "://" in chosen else "http://" + chosen


def bypasses(host: str, no_proxy: str) -> bool:
    """Whether ``host`` (as in a URL: a name, an IPv4 address or an IPv6 address, brackets
    optional) is on the ``no_proxy`` list, by curl's rules (see the module docstring)."""
    if no_proxy.strip() == "*":
        return True
    name = host.strip("[]").split("%", 1)[0].lower()
    address = _address(name)
    if address is None:
        name = name.rstrip(".")
    for token in _SEPARATORS.split(no_proxy.lower()):
        if not token:
            continue
        if address is not None:
            if _in_range(address, token):
                return True
            continue
        pattern = _without_port(token).rstrip(".").lstrip(".")
        if pattern and (name == pattern or name.endswith("." + pattern)):
            return True
    return False


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _in_range(address: ipaddress.IPv4Address | ipaddress.IPv6Address, token: str) -> bool:
    """Whether ``address`` is the address, or in the CIDR range, ``token`` writes."""
    text = token
    if text.startswith("["):  # [::1] or [::1]:8080
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # 127.0.0.1:8080
        text = text.partition(":")[0]
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return network.version == address.version and address in network


def _without_port(token: str) -> str:
    head, colon, port = token.rpartition(":")
    return head if colon and port.isdigit() else token
