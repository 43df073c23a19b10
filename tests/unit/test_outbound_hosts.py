"""Issue 29 item 2: a ``callbackUrl`` host is checked as the HTTP client will connect to it.

yarl (under aiohttp) maps a Unicode host through IDNA/NFKC, so ``①②⑦.0.0.1`` is called as
``127.0.0.1``; such hosts are refused when the URL arrives, whatever they normalise to."""

from __future__ import annotations

import pytest
from yarl import URL

from engine.domain.errors import InvalidRequest
from engine.domain.outbound import OutboundTargets

REWRITTEN = {
    "①②⑦.0.0.1": "127.0.0.1",  # circled digits
    "\uff11\uff12\uff17.\uff10.\uff10.\uff11": "127.0.0.1",  # full-width digits and full stops
    "127。0。0。1": "127.0.0.1",  # ideographic full stops
    "①⑥⑨.②⑤④.①⑥⑨.②⑤④": "169.254.169.254",  # the metadata service
    "\uff11\uff10.\uff10.\uff10.\uff11": "10.0.0.1",
    "\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com": "example.com",  # full-width letters
}
# Mapped away by IDNA, refused by yarl itself: refused on arrival all the same.
INVISIBLE = ["ex\u00adample.com", "\u200b127.0.0.1", "127.0.0.1\u00ad"]


@pytest.mark.parametrize("host", sorted(REWRITTEN))
def test_a_host_the_client_would_rewrite_is_refused_on_arrival(host: str) -> None:
    url = f"http://{host}:8080/hook"
    assert URL(url).host == REWRITTEN[host]  # what aiohttp would really connect to
    with pytest.raises(InvalidRequest) as caught:
        OutboundTargets().check_url(url)
    assert "normal form" in caught.value.message
    assert REWRITTEN[host] in caught.value.message


@pytest.mark.parametrize("host", INVISIBLE)
def test_a_host_with_invisible_characters_is_refused_on_arrival(host: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        OutboundTargets().check_url(f"http://{host}:8080/hook")
    assert "normal form" in caught.value.message


def test_the_rewrite_is_refused_even_when_the_network_is_allow_listed() -> None:
    """An allow-listed receiver is reached under its own name, not a disguise of it."""
    import ipaddress

    allow = OutboundTargets([ipaddress.ip_network("127.0.0.0/8")])
    allow.check_url("http://127.0.0.1:8080/hook")
    with pytest.raises(InvalidRequest):
        allow.check_url("http://①②⑦.0.0.1:8080/hook")


@pytest.mark.parametrize(
    "host", ["bücher.example", "xn--bcher-kva.example", "münchen.de", "例え.テスト", "example.com"]
)
def test_a_name_already_in_normal_form_passes(host: str) -> None:
    OutboundTargets().check_url(f"https://{host}/hook")


def test_a_name_the_mappings_disagree_on_is_refused() -> None:
    """IDNA 2003 (yarl's fallback) calls ``faß.de`` ``fass.de``; UTS-46 keeps it: ambiguous."""
    with pytest.raises(InvalidRequest):
        OutboundTargets().check_url("https://faß.de/hook")


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0xa9.254.169.254", "169.254.169.254"),
    ],
)
def test_old_address_forms_are_read_as_getaddrinfo_reads_them(host: str, address: str) -> None:
    from engine.domain.outbound import legacy_ipv4

    assert str(legacy_ipv4(host)) == address
    with pytest.raises(InvalidRequest) as caught:
        OutboundTargets().check_url(f"http://{host}/")
    assert "internal address" in caught.value.message


@pytest.mark.parametrize("host", ["example.com", "1.2.3.4.5", "256.1.1.1", "0x", "a.b"])
def test_names_are_not_old_address_forms(host: str) -> None:
    from engine.domain.outbound import legacy_ipv4

    assert legacy_ipv4(host) is None
