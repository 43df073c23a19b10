"""Real JWT validation of incoming activities when an app id is configured.

A locally generated RSA key signs the tokens; its public half is served as an OpenID metadata
document and a JWKS on loopback, and ``teams.openIdMetadataUrl`` / ``teams.tokenIssuer`` point
the Bot Framework SDK at them. Only a token signed by that key, from that issuer, for this app
id, unexpired, for this serviceUrl is accepted.

The metadata server runs on its own thread: the SDK fetches the keys with blocking
``requests`` calls from inside the event loop, which would deadlock a server on the same loop.
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
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from teamsharness import CHANNEL, FLOW, Teams, running_teams

APP_ID = "5d2f1e0a-3b4c-4d5e-8f90-a1b2c3d4e5f6"
ISSUER = "https://api.botframework.test"
KID = "signoff-test-key"


def _key() -> rsa.RSAPrivateKey:
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


@pytest.fixture
def signing_key() -> rsa.RSAPrivateKey:
    return _key()


@pytest.fixture
async def teams(sqlite_url, signing_key):
    from engine.store.migrate import upgrade_to_head

    await upgrade_to_head(sqlite_url)
    with openid_server(signing_key) as metadata_url:
        extra = (
            f"teams: {{appId: '{APP_ID}', appPassword: 'not-used-here', "
            f"openIdMetadataUrl: '{metadata_url}', tokenIssuer: '{ISSUER}'}}\n"
        )
        async with running_teams(sqlite_url, FLOW, extra=extra) as t:
            yield t


def install_activity(teams: Teams) -> dict[str, Any]:
    activity = teams._base(conversation=CHANNEL, kind="channel", user="alice")
    activity.update(type="conversationUpdate", membersAdded=[{"id": "28:" + APP_ID}])
    activity["recipient"] = {"id": "28:" + APP_ID, "name": "Signoff"}
    return activity


async def stored(teams: Teams) -> bool:
    return await teams.engine.store.conversation("teams", conversation_id=CHANNEL) is not None


async def test_a_valid_token_is_accepted(teams: Teams, signing_key):
    bearer = token(signing_key, teams.connector.service_url)
    status, _ = await teams.post(install_activity(teams), Authorization=f"Bearer {bearer}")
    assert status == 200
    assert await stored(teams)


@pytest.mark.parametrize(
    "case",
    ["missing", "forged", "expired", "wrong audience", "wrong issuer", "unknown key", "other url"],
)
async def test_bad_tokens_are_rejected_and_change_nothing(teams: Teams, signing_key, case):
    url = teams.connector.service_url
    bearer = {
        "missing": None,
        "forged": token(_key(), url),  # same key id, someone else's key
        "expired": token(signing_key, url, exp=int(time.time()) - 600, iat=0, nbf=0),
        "wrong audience": token(signing_key, url, aud="another-bot-app-id"),
        "wrong issuer": token(signing_key, url, iss="https://evil.example"),
        "unknown key": token(signing_key, url, kid="rotated-away"),
        "other url": token(signing_key, "https://smba.evil.example/"),
    }[case]
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    status, body = await teams.post(install_activity(teams), **headers)
    assert status == 401 and body == {"error": "unauthorized"}
    assert not await stored(teams)
    # An invoke is refused the same way: nobody decides anything with a bad token.
    status, _ = await teams.click("refresh", "id-000001", as_="bob")
    assert status == 401
