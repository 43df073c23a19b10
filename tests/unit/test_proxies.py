"""Issue 29 item 12: which proxy an outbound request takes, by curl's documented rules
(CURLOPT_NOPROXY and the proxy environment variables), read once from the environment."""

from __future__ import annotations

import pytest

from engine.domain.proxies import ProxySettings, bypasses

PROXY = "http://proxy.internal:3128"


@pytest.mark.parametrize(
    ("host", "no_proxy", "direct"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "localhost,127.0.0.1", True),
        ("127.0.0.1", "localhost, 127.0.0.1", True),  # spaces around entries
        ("127.0.0.2", "127.0.0.1", False),
        ("127.0.0.9", "127.0.0.0/8", True),  # CIDR (curl 7.86)
        ("10.1.2.3", "192.168.0.0/16", False),
        ("::1", "::1", True),  # IPv6 written without brackets
        ("[::1]", "::1", True),
        ("fd00::5", "fd00::/8", True),
        ("example.com", "example.com", True),
        ("www.example.com", "example.com", True),  # a domain covers its subdomains
        ("www.example.com", ".example.com", True),  # a leading dot means the same
        ("example.com", ".example.com", True),
        ("www.example.com", "ample.com", False),  # never a bare suffix (requests says yes)
        ("ample.com.org", "ample.com", False),
        ("EXAMPLE.com.", "example.COM", True),  # case and a trailing dot do not matter
        ("example.com", "example.com:8080", True),  # ports ignored
        ("anything.example", "*", True),  # the one wildcard
        ("anything.example", "*.example", False),  # no globbing: "*" only alone
        ("127.0.0.1", "localhost", False),  # names never match addresses
        ("localhost", "127.0.0.1", False),
        ("example.com", "", False),
    ],
)
def test_no_proxy_matches_as_curl_does(host: str, no_proxy: str, direct: bool) -> None:
    assert bypasses(host, no_proxy) is direct


@pytest.mark.parametrize(
    ("env", "url", "proxy"),
    [
        ({"HTTPS_PROXY": PROXY}, "https://slack.com/api", PROXY),
        ({"https_proxy": PROXY}, "https://slack.com/api", PROXY),
        ({"HTTPS_PROXY": PROXY}, "http://hooks.example/x", None),  # https only
        ({"http_proxy": PROXY}, "http://hooks.example/x", PROXY),
        ({"HTTP_PROXY": PROXY}, "http://hooks.example/x", None),  # curl: httpoxy
        ({"ALL_PROXY": PROXY}, "http://hooks.example/x", PROXY),
        (
            {"all_proxy": PROXY, "https_proxy": "http://other:1"},
            "https://a.example",
            "http://other:1",
        ),
        ({"HTTPS_PROXY": "proxy.internal:3128"}, "https://slack.com", PROXY),  # http:// implied
        ({"HTTPS_PROXY": PROXY, "NO_PROXY": "127.0.0.1"}, "https://127.0.0.1:8443/r", None),
        ({"HTTPS_PROXY": PROXY, "no_proxy": "slack.com"}, "https://hooks.slack.com/x", None),
        ({"HTTPS_PROXY": PROXY, "no_proxy": "", "NO_PROXY": "*"}, "https://slack.com", PROXY),
        ({"HTTPS_PROXY": PROXY, "NO_PROXY": "*"}, "https://slack.com", None),
        ({}, "https://slack.com", None),
    ],
)
def test_the_proxy_chosen_for_a_url(env: dict[str, str], url: str, proxy: str | None) -> None:
    assert ProxySettings.from_env(env).proxy_for(url) == proxy
