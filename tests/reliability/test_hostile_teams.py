"""Hostile Teams requests against a real ``signoff serve`` (issue 29, items 4, 7 and 11).

Two servers on SQLite, each with a run parked on bob's decision and a fake Bot Connector as
every activity's ``serviceUrl``:

* ``signed``: ``teams.appId`` and ``teams.tenantId``; tokens are real RS256 JWTs from the
  test's own issuer (``tests.fakes.openid``), valid in every respect;
* ``unsigned``: the Agents Playground's way, ``insecureLocalDev: true`` with
  ``TEAMS_APP_TENANT_ID`` set in the environment and no app id (item 11: it starts).

Attacks: bob's grant and alice's ``gate threshold`` sent from another tenant, or with the
tenant smuggled into one of the places Teams names it, or named nowhere, or in the token's
``tid`` (item 7): each is a 403 ``wrong_tenant`` and changes no row. A second ``signoff serve``
of the unsigned configuration told to listen beyond loopback (``--host 0.0.0.0``, ``--host ::``,
``SIGNOFF_HOST=0.0.0.0``) exits 2 with one line naming ``teams.insecureLocalDev`` and never
answers (item 4). The running server's ``/healthz`` answers within 1 s throughout (``-s``
prints the worst round trip of each test).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.openid import new_key, openid_server, teams_config, token
from tests.fakes.teams import FakeConnector
from tests.integration.teams.teamsharness import TENANT, Teams
from tests.reliability.hostile import (  # latency_report: the module's worst /healthz, printed
    assert_refused,
    latency_report,  # noqa: F401
    send,
    watching,
)
from tests.reliability.served import NO_WAY_OUT, Target, config_body, on_a_thread, serve
from tests.support.process import ROOT, child_env, free_port
from tests.support.waiting import quiet_sync

ROUTE = "/api/messages"
OTHER = "0b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b"
PERSONAL = "a:1personal-chat-with-the-bot"
# The default app.yaml's teams line, for the Playground: the tenant comes from the environment.
PLAYGROUND = (
    'teams: {appId: "${TEAMS_APP_ID:-}", appPassword: "${TEAMS_APP_PASSWORD:-}", '
    'tenantId: "${TEAMS_APP_TENANT_ID:-}", insecureLocalDev: true}\n'
)
PLAYGROUND_ENV = {"TEAMS_APP_ID": "", "TEAMS_APP_PASSWORD": "", "TEAMS_APP_TENANT_ID": TENANT}


@dataclass
class TeamsServer:
    """A running server, the activity builder aimed at its fake Bot Connector, and the
    issuer's key when the server checks tokens (None: it takes unsigned activities)."""

    server: Target
    builder: Teams
    key: rsa.RSAPrivateKey | None

    def post(self, activity: dict[str, Any], **claims: Any) -> tuple[int, bytes]:
        """Send ``activity`` as Teams would: with a valid token when one is needed;
        ``claims`` are added to it."""
        headers = {}
        if self.key is not None:
            bearer = token(self.key, self.builder.connector.service_url, **claims)
            headers["Authorization"] = f"Bearer {bearer}"
        raw = json.dumps(activity).encode()
        status, _, body = send(self.server, "POST", ROUTE, raw, None, headers)
        return status, body

    def grant(self, by: str = "bob") -> dict[str, Any]:
        """``by`` clicks Grant on the parked run's request (bob may decide it)."""
        return self.builder.click_activity("grant", self.server.request_id, as_=by)

    def gate_command(self) -> dict[str, Any]:
        """alice, the admin, lowers the gate in her personal chat with the bot."""
        activity = self.builder._base(conversation=PERSONAL, kind="personal", user="alice")
        activity.update(type="message", text="gate threshold 0.1")
        return activity


def builder(connector: FakeConnector) -> Teams:
    # The integration harness's activity builder, without its in-process server.
    return Teams(client=None, engine=None, connector=connector, clock=None)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamsServer]:
    key = new_key()
    with openid_server(key) as metadata_url, on_a_thread(FakeConnector) as connector:
        teams = teams_config(metadata_url).replace("}\n", f", tenantId: '{TENANT}'}}\n")
        with serve(tmp_path_factory.mktemp("teams-tenant"), config_body(teams)) as server:
            yield TeamsServer(server, builder(connector), key)


@pytest.fixture(scope="module")
def unsigned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamsServer]:
    with pytest.MonkeyPatch.context() as env:
        for name, value in PLAYGROUND_ENV.items():  # serve() hands its environment down
            env.setenv(name, value)
        with (
            on_a_thread(FakeConnector) as connector,
            serve(tmp_path_factory.mktemp("teams-playground"), config_body(PLAYGROUND)) as server,
        ):
            yield TeamsServer(server, builder(connector), None)


def from_tenant(activity: dict[str, Any], tenant: object) -> dict[str, Any]:
    activity["conversation"]["tenantId"] = tenant
    activity["channelData"]["tenant"] = {"id": tenant}
    return activity


# Each bends an activity of the bot's own tenant into one that is not.
FOREIGN: dict[str, Callable[[dict[str, Any]], object]] = {
    "another tenant": lambda a: from_tenant(a, OTHER),
    "in the conversation only": lambda a: a["conversation"].update(tenantId=OTHER),
    "in channelData only": lambda a: a["channelData"].update(tenant={"id": OTHER}),
    "as tenantID": lambda a: a["conversation"].update(tenantID=OTHER),
    "named nowhere": lambda a: (a["conversation"].pop("tenantId"), a.pop("channelData")),
    "a null tenant": lambda a: from_tenant(a, None),
    "a list": lambda a: a["channelData"].update(tenant=[TENANT]),
    "a 100 KB tenant": lambda a: from_tenant(a, "x" * 100_000),
}


def assert_wrong_tenant(status: int, body: bytes) -> None:
    error = assert_refused(status, body, 403)
    assert error["error"] == "wrong_tenant", error
    assert len(error["message"]) < 300, error  # a 100 KB tenant is not echoed back


@pytest.mark.parametrize("case", list(FOREIGN))
@pytest.mark.parametrize("what", ["grant", "gate_command"])
def test_another_tenant_with_a_valid_token_changes_nothing(
    signed: TeamsServer, what: str, case: str
) -> None:
    activity = getattr(signed, what)()
    FOREIGN[case](activity)
    with watching(f"teams signed: {what} {case}", signed.server):
        assert_wrong_tenant(*signed.post(activity))


@pytest.mark.parametrize("what", ["grant", "gate_command"])
def test_a_token_naming_another_tenant_changes_nothing(signed: TeamsServer, what: str) -> None:
    with watching(f"teams signed: {what} token tid", signed.server):
        assert_wrong_tenant(*signed.post(getattr(signed, what)(), tid=OTHER))


@pytest.mark.parametrize("case", list(FOREIGN))
@pytest.mark.parametrize("what", ["grant", "gate_command"])
def test_another_tenant_unsigned_changes_nothing(
    unsigned: TeamsServer, what: str, case: str
) -> None:
    activity = getattr(unsigned, what)()
    FOREIGN[case](activity)
    with watching(f"teams unsigned: {what} {case}", unsigned.server):
        assert_wrong_tenant(*unsigned.post(activity))


@pytest.mark.parametrize("server", ["signed", "unsigned"])
def test_the_own_tenant_is_let_in(request: pytest.FixtureRequest, server: str) -> None:
    """The refusals above are the tenant's doing: the same click from the bot's own tenant by
    mallory, who may decide nothing, gets past the check (200, her card says no) and, being
    hers, changes nothing either."""
    teams: TeamsServer = request.getfixturevalue(server)
    with watching(f"teams {server}: own tenant", teams.server):
        status, body = teams.post(teams.grant(by="mallory"))
        assert status == 200, body[:300]
        assert b"you are not an approver for this request" in body, body[:600]


def serve_beyond_loopback(
    config: Any, args: list[str], env: dict[str, str]
) -> tuple[int, str, list[int]]:
    """Start ``signoff serve`` with ``args``; while it runs, send alice's unsigned ``gate``
    command to every address it could be listening on. Returns its exit code, its stderr and
    the statuses of the commands that got an answer."""
    port = free_port()
    command = ["serve", "--config", str(config), "--port", str(port), *args]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", *command],
        cwd=ROOT,
        env=child_env(**NO_WAY_OUT, **PLAYGROUND_ENV, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    answered: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline and not answered:
            for base in (f"http://127.0.0.1:{port}", f"http://[::1]:{port}"):
                request = urllib.request.Request(
                    base + ROUTE,
                    data=json.dumps(GATE_COMMAND).encode(),
                    headers={"Content-Type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(request, timeout=5) as resp:
                        answered.append(resp.status)
                except urllib.error.HTTPError as exc:
                    answered.append(exc.code)
                except (urllib.error.URLError, OSError):
                    pass  # nothing listening (yet)
            quiet_sync(0.05)  # the process is still starting: real time
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=30)
    return proc.returncode, err.decode(), answered


GATE_COMMAND = {
    "type": "message",
    "id": "1700000000009",
    "channelId": "msteams",
    "serviceUrl": "http://127.0.0.1:9/",
    "text": "gate threshold 0.1",
    "from": {"id": "29:1alice", "name": "Alice", "aadObjectId": "aad-alice"},
    "recipient": {"id": "28:bot", "name": "Signoff"},
    "conversation": {"id": PERSONAL, "conversationType": "personal", "tenantId": TENANT},
    "channelData": {"tenant": {"id": TENANT}},
}


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--host", "0.0.0.0"], {}, "--host has it listening on 0.0.0.0:"),
        (["--host", "::"], {}, "--host has it listening on :::"),
        ([], {"SIGNOFF_HOST": "0.0.0.0"}, "server.host on loopback"),
    ],
    ids=["--host 0.0.0.0", "--host ::", "SIGNOFF_HOST=0.0.0.0"],
)
def test_insecure_local_dev_never_serves_beyond_loopback(
    unsigned: TeamsServer, args: list[str], env: dict[str, str], said: str
) -> None:
    """The unsigned server's own configuration, started again on another port but told to
    listen on every interface: it refuses before anyone can reach it, whatever said where."""
    config = unsigned.server.db.parent / "app.yaml"
    how = " ".join(args) or " ".join(f"{name}={value}" for name, value in env.items())
    with watching(f"teams serve {how}", unsigned.server):
        code, err, answered = serve_beyond_loopback(config, args, env)
    assert answered == [], f"it served and answered {answered}"
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("config error: teams.insecureLocalDev: "), line
    assert said in line, line
