"""Hostile HTTP against a real ``signoff serve`` (issue 29, items 9 and 13): requests aiohttp's
parser refuses before any middleware sees them, written on a raw socket (no client would send
them), and the approval page fetched by someone who is nobody.

Expected: a 4xx with ``{error, message}`` and the headers every answer carries (``Server:
Signoff`` without a version, the content security policy, ``nosniff``, frame denial and
``Cache-Control: no-store``); no traceback in the server's log; no row changed; ``/healthz``
within 1 s throughout.
"""

from __future__ import annotations

import json
import socket
import urllib.parse

import pytest

from tests.reliability.hostile import (  # latency_report: the module's worst /healthz, printed
    assert_refused,
    latency_report,  # noqa: F401
    send,
    watching,
)
from tests.reliability.served import Target

HOST = b"Host: signoff.test\r\n"
LONG = 9_000  # aiohttp's limit for a request line and for a header is 8,190 bytes

RAW = {
    "a Content-Length that is no number": (
        b"POST /v1/runs HTTP/1.1\r\n" + HOST + b"Content-Length: ten\r\n\r\n{}"
    ),
    "two Content-Lengths that disagree": (
        b"POST /v1/runs HTTP/1.1\r\n" + HOST + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}"
    ),
    "a request line over the limit": b"GET /" + b"a" * LONG + b" HTTP/1.1\r\n" + HOST + b"\r\n",
    "a header over the limit": (
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Long: " + b"a" * LONG + b"\r\n\r\n"
    ),
    "Transfer-Encoding and Content-Length together": (
        b"POST /v1/runs HTTP/1.1\r\n"
        + HOST
        + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"
    ),
    "a chunk size that is no number": (
        b"POST /v1/runs HTTP/1.1\r\n"
        + HOST
        + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    ),
    "a Transfer-Encoding other than chunked": (
        b"POST /v1/runs HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: gzip\r\n\r\n{}"
    ),
    "a header folded onto the next line": (
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Note: a\r\n b\r\n\r\n"
    ),
    "NUL in the request line": b"GET /heal\x00thz HTTP/1.1\r\n" + HOST + b"\r\n",
    "NUL in a header": b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Note: a\x00b\r\n\r\n",
    "a bad HTTP version": b"GET /healthz HTTP/9.x\r\n" + HOST + b"\r\n",
    "an invalid method": b"G(T /healthz HTTP/1.1\r\n" + HOST + b"\r\n",
}


def raw_exchange(target: Target, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Write ``raw`` on a fresh connection and read the answer until the server closes it
    (aiohttp closes the connection after a parser error)."""
    url = urllib.parse.urlsplit(target.base)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(raw)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def assert_signoff_headers(headers: dict[str, str]) -> None:
    assert headers.get("server") == "Signoff", headers
    assert headers.get("x-content-type-options") == "nosniff", headers
    assert "default-src 'none'" in headers.get("content-security-policy", ""), headers
    assert "frame-ancestors 'none'" in headers["content-security-policy"], headers
    assert headers.get("x-frame-options") == "DENY", headers
    assert headers.get("cache-control") == "no-store", headers


@pytest.mark.parametrize("case", sorted(RAW))
def test_a_request_the_parser_refuses_gets_signoffs_headers(target: Target, case: str) -> None:
    with watching(case, target):
        status, headers, body = raw_exchange(target, RAW[case])
        assert 400 <= status < 500, (status, body[:300])
        assert_refused(status, body, status)  # {error, message}, in JSON
        assert headers.get("content-type", "").startswith("application/json"), headers
        assert_signoff_headers(headers)
        text = json.dumps(headers) + body.decode("utf-8", "replace")
        assert "aiohttp" not in text and "Python" not in text, text[:500]


def test_the_approval_page_and_its_json_show_nobody_the_arguments(target: Target) -> None:
    """No session, no signed link: the page says a request exists and offers to sign in; the
    API and the page's live stream behind it answer nobody."""
    page = f"/approvals/{target.request_id}"
    with watching("the approval page to nobody", target):
        status, headers, body = send(target, "GET", page, token=None)
        assert status == 200
        assert_signoff_headers({k.lower(): v for k, v in headers.items()})
        html = body.decode()
        assert "o-1" not in html  # the run's order: the card's arguments and summary
        assert "bob" not in html  # the approvers
        assert "/console/login?next=" + urllib.parse.quote(page, safe="") in html
        status, _, body = send(target, "GET", f"/v1/runs/{target.run_id}/takeover", token=None)
        assert_refused(status, body, 401)
        status, headers, body = send(target, "GET", f"{page}/events", token=None)
        assert status == 401 and "o-1" not in body.decode()  # its live stream: refused
        assert "event-stream" not in headers.get("Content-Type", "")
