"""A fake Bot Framework token issuer: an OpenID metadata document and a JWKS served on
loopback, and Bearer tokens signed with its locally generated RSA key.

``teams.openIdMetadataUrl`` / ``teams.tokenIssuer`` point the Bot Framework SDK at it, so JWT
validation of incoming activities runs for real (PLATFORM.md): only a token signed by that key,
from ``ISSUER``, for ``APP_ID``, unexpired, for the activity's serviceUrl is accepted.

    key = new_key()
    with openid_server(key) as metadata_url:
        bearer = token(key, service_url)                     # valid
        bearer = token(key, service_url, aud="someone-else")  # any claim overridden
        bearer = bad_token("expired", key, service_url, new_key())  # one of BAD_TOKENS

The server runs on its own thread: the SDK fetches the keys with blocking ``requests`` calls from
inside the event loop, which would deadlock a server on the same loop.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

APP_ID = "5d2f1e0a-3b4c-4d5e-8f90-a1b2c3d4e5f6"
ISSUER = "https://api.botframework.test"
KID = "signoff-test-key"
METADATA_PATH = "/.well-known/openid-configuration"
# Issuers the Bot Framework SDK reads as the Emulator's (EmulatorValidation): their tokens make
# it fetch https://login.botframework.com/v1/.well-known/openidconfiguration.
EMULATOR_ISSUERS = (
    "https://sts.windows.net/d6d49420-f39b-4df7-a1dc-d59a935871db/",
    "https://login.microsoftonline.com/d6d49420-f39b-4df7-a1dc-d59a935871db/v2.0",
    "https://sts.windows.net/f8cdef31-a31e-4b4a-93e4-5f571e91255a/",
    "https://login.microsoftonline.com/f8cdef31-a31e-4b4a-93e4-5f571e91255a/v2.0",
)


@dataclass
class Issuer:
    """What the issuer was asked, and whether it answers."""

    paths: list[str] = field(default_factory=list)  # every GET, in order
    down: bool = False  # answer every GET with 503

    @property
    def metadata_fetches(self) -> int:
        return self.paths.count(METADATA_PATH)


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@contextmanager
def openid_server(key: rsa.RSAPrivateKey, issuer: Issuer | None = None) -> Iterator[str]:
    """Serve ``/.well-known/openid-configuration`` and ``/keys``; yields the metadata URL.
    ``issuer`` records the requests and can take the server down."""
    state = issuer if issuer is not None else Issuer()
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid=KID, use="sig", alg="RS256", endorsements=["msteams"])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            state.paths.append(self.path)
            if state.down:
                self.send_error(503)
                return
            if self.path == METADATA_PATH:
                body: Any = {"issuer": ISSUER, "jwks_uri": f"{base}/keys"}
            elif self.path == "/keys":
                body = {"keys": [jwk]}
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)  # a client that timed out has gone

        def log_message(self, *args: Any) -> None:
            pass

    with _serving(Handler) as base:
        yield f"{base}/.well-known/openid-configuration"


@contextmanager
def the_internet() -> Iterator[tuple[str, list[str]]]:
    """A forward proxy standing for everything off this machine: it records where each request
    through it was going (``CONNECT host:port``, or the absolute URL) and refuses it (502).
    Yields its URL, for ``HTTPS_PROXY`` / ``HTTP_PROXY``, and the list of destinations."""
    wanted: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            wanted.append(self.path)
            self.send_error(502)

        do_CONNECT = do_GET = do_POST = _refuse

        def log_message(self, *args: Any) -> None:
            pass

    with _serving(Handler) as base:
        yield base, wanted


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on a loopback port in a thread; yields the server's base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def token(key: rsa.RSAPrivateKey, service_url: str, *, kid: str = KID, **claims: Any) -> str:
    """A Bot Framework channel token for ``service_url``; ``claims`` override the defaults."""
    now = int(time.time())
    body = {
        "iss": ISSUER,
        "aud": APP_ID,
        "serviceurl": service_url,
        "nbf": now - 60,
        "iat": now - 60,
        "exp": now + 3600,
        **claims,
    }
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})


# Tokens the SDK must refuse; each is valid in every other respect.
BAD_TOKENS = ("forged", "expired", "wrong audience", "wrong issuer", "unknown key", "other url")


def bad_token(
    case: str, key: rsa.RSAPrivateKey, service_url: str, other_key: rsa.RSAPrivateKey
) -> str:
    """One of ``BAD_TOKENS``; "forged" is signed by ``other_key`` under our key id."""
    if case == "forged":
        return token(other_key, service_url)
    claims: dict[str, Any] = {
        "expired": {"exp": int(time.time()) - 600, "iat": 0, "nbf": 0},
        "wrong audience": {"aud": "another-bot-app-id"},
        "wrong issuer": {"iss": "https://evil.example"},
        "unknown key": {"kid": "rotated-away"},
        "other url": {"service_url": "https://smba.evil.example/"},
    }[case]
    return token(key, claims.pop("service_url", service_url), **claims)


def teams_config(metadata_url: str) -> str:
    """The ``teams:`` line of ``app.yaml`` that validates tokens against this issuer."""
    return (
        f"teams: {{appId: '{APP_ID}', appPassword: 'not-used-here', "
        f"openIdMetadataUrl: '{metadata_url}', tokenIssuer: '{ISSUER}'}}\n"
    )
