"""Issue 29 item 2 against a real ``signoff serve``: an agent token's ``callbackUrl`` whose host
IDNA/NFKC turns into an internal address (``①②⑦.0.0.1`` is called as ``127.0.0.1``) is refused
with a 400 naming the normal form, nothing is stored, and a receiver listening on that loopback
port gets nothing. ``/healthz`` is polled throughout (``watching``); ``-s`` prints the worst."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.reliability.hostile import (  # latency_report: the module's worst /healthz, printed
    assert_refused,
    latency_report,  # noqa: F401
    send,
    watching,
)
from tests.reliability.served import WORKFLOWS, Target, config_body, serve

# A read the policy allows at once: on main, the call ran and its callback was POSTed.
CALLS = """\
connectors:
  demo-ledger:
    type: demo-ledger
    actions:
      lookup: {kind: read}
      refund: {kind: write}
"""
UNICODE_HOSTS = {
    "circled digits": "①②⑦.0.0.1",
    "full-width digits and stops": "\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11",
    "ideographic full stops": "127。0。0。1",
    "the metadata address, circled": "①⑥⑨.②⑤④.①⑥⑨.②⑤④",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    body = config_body().replace(WORKFLOWS, CALLS + WORKFLOWS)
    with serve(tmp_path_factory.mktemp("outbound"), body) as target:
        yield target


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[int, list[str]]]:
    """A loopback HTTP server recording every request path; (port, paths)."""
    received: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.path)
            self.send_response(204)
            self.end_headers()

        do_GET = do_POST

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield http.server_address[1], received
    finally:
        http.shutdown()
        http.server_close()


@pytest.mark.parametrize("case", sorted(UNICODE_HOSTS))
def test_a_unicode_callback_host_is_refused_and_nobody_is_called(
    server: Target, receiver: tuple[int, list[str]], case: str
) -> None:
    port, received = receiver
    url = f"http://{UNICODE_HOSTS[case]}:{port}/hook"
    call = {"connector": "demo-ledger", "action": "lookup", "args": {"order": "o"}}
    with watching(f"callbackUrl {case}", server):
        status, _, body = send(
            server, "POST", "/v1/calls", json.dumps({**call, "callbackUrl": url}).encode()
        )
        error = assert_refused(status, body)
        assert "normal form" in error["message"], error
    assert received == []
