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

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

APP_ID = "5d2f1e0a-3b4c-4d5e-8f90-a1b2c3d4e5f6"
ISSUER = "https://api.botframework.test"
KID = "signoff-test-key"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@contextmanager
def openid_server(key: rsa.RSAPrivateKey) -> Iterator[str]:
    """Serve ``/.well-known/openid-configuration`` and ``/keys``; yields the metadata URL."""
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid=KID, use="sig", alg="RS256", endorsements=["msteams"])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            if self.path == "/.well-known/openid-configuration":
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
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/openid-configuration"
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
