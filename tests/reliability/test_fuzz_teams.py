"""Fuzzing the Teams messaging endpoint (``POST /api/messages``) of a real ``signoff serve``
(SQLite) that validates Bot Framework JWTs for real, against a local OpenID issuer
(``tests.fakes.openid``); its replies go to a local fake Bot Connector (``tests.fakes.teams``)
named as every activity's ``serviceUrl``, never anywhere else.

Hypothesis builds activities as Teams sends them and then bends them: every activity type
(message, invoke ``adaptiveCard/action`` and others, conversationUpdate, installationUpdate,
unknown ones), hostile and huge texts (``tests.support.hostile``), card-action ``value``
payloads with missing fields, wrong types, unknown verbs, huge strings, ids of requests that do
not exist, and the id of a real pending request clicked by people who may not decide it
(alice the admin, mallory, an unknown Azure AD id, nobody at all); junk in any top-level field.

Two servers: one with ``teams.appId`` that validates every JWT, and one without but with
``teams.insecureLocalDev`` (the Agents Playground's way). Only the second's replies reach the
fake Bot Connector: an authenticated bot asks Microsoft's login service for a token before
every connector call, and that call is refused on the spot here (``served.NO_WAY_OUT``), so
the first server shows how a reply that cannot be sent is handled.

Expected:

* without a valid token (none, garbage, not Bearer, expired, wrong audience, wrong issuer,
  another key, an unknown key id, another serviceUrl): 401, decided from the Authorization
  header before the body is read (a token valid but for another serviceUrl is matched against
  the activity, so junk that leaves no usable activity gets 400 there), and no row of any
  table changes;
* with a valid token (or none needed): never a 5xx, and no decision (the pending request stays
  pending, no vote, no journal event, no side effect);
* either way, no traceback in the server's log.

Examples per test: 150 in CI, 10,000 under ``SIGNOFF_RELIABILITY_FULL=1``.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given
from hypothesis import strategies as st

from tests.fakes.openid import (
    BAD_TOKENS,
    bad_token,
    new_key,
    openid_server,
    teams_config,
    token,
)
from tests.fakes.teams import FakeConnector
from tests.integration.teams.teamsharness import CHANNEL, UNSIGNED, Teams
from tests.reliability.served import (
    DECIDERS,
    FUZZ,
    Target,
    config_body,
    json_values,
    on_a_thread,
    serve,
)
from tests.support.hostile import HOSTILE

ROUTE = "/api/messages"
PERSONAL = "a:1personal-chat-with-the-bot"
HUGE = "x" * 100_000
# Who acts: the approver, the admin (no approver, but may override), a known non-approver, an
# Azure AD id not in people:, and an activity with no ``from`` at all.
ACTORS = ["bob", "alice", "mallory", "stranger", None]
VERBS = ["grant", "deny", "takeover", "release", "refresh", "feedback"]
COMMANDS = [
    "help",
    "subscribe ops",
    "subscribe",
    "subscribe Not A Name!",
    "gate status",
    "gate on",
    "gate threshold 2",
    "gate samples 12",
    "<p>help&nbsp;</p>",
    "<at>Signoff</at> gate status",
    "gate threshold 0.5 agent=x node=y",
]
KINDS = [
    "message",
    "message",
    "click",
    "click",
    "click",
    "invoke",
    "conversationUpdate",
    "installationUpdate",
    "other",
]  # repeated: drawn more often
JUNK_FIELDS = [
    "from",
    "conversation",
    "recipient",
    "channelData",
    "entities",
    "attachments",
    "replyToId",
    "timestamp",
    "locale",
    "membersAdded",
    "membersRemoved",
    "action",
    "name",
    "value",
    "text",
    "id",
    "channelId",
    "textFormat",
    "serviceUrl",
]
SERVICE_URLS = [None, "", "not a url", "http://127.0.0.1:9/"]


@dataclass
class TeamsTarget:
    """The server under test, the fake Bot Connector it replies to, and the issuer's key when
    the server checks tokens (``key`` None: no ``teams.appId``, every request is let in)."""

    server: Target
    connector: FakeConnector
    key: rsa.RSAPrivateKey | None
    other_key: rsa.RSAPrivateKey = field(default_factory=new_key)  # signs the forged tokens
    kinds: Counter[str] = field(default_factory=Counter)  # what the fuzz sent
    statuses: dict[str, Counter[int]] = field(default_factory=dict)  # test -> status -> n
    conversations: Iterator[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        # The integration harness's activity builder, without its in-process server.
        self.builder = Teams(client=None, engine=None, connector=self.connector, clock=None)  # type: ignore[arg-type]

    def post(self, activity: Any, authorization: str | None, tally: str) -> int:
        """Send ``activity``; its status is counted under ``tally``."""
        headers = {"Content-Type": "application/json"}
        if authorization is not None:
            headers["Authorization"] = authorization
        status = self.server.send("POST", ROUTE, json.dumps(activity).encode(), headers)
        self.statuses.setdefault(tally, Counter())[status] += 1
        return status

    def valid(self) -> str | None:
        """The Authorization header Teams would send (none to a server without an app id)."""
        if self.key is None:
            return None
        return f"Bearer {token(self.key, self.connector.service_url)}"

    def summary(self, name: str) -> str:
        statuses = "; ".join(
            f"{tally}: {sum(counts.values())} requests, statuses {dict(sorted(counts.items()))}"
            for tally, counts in self.statuses.items()
        )
        return (
            f"\n{name}: {statuses}; activities {dict(self.kinds.most_common())}; "
            f"Bot Connector calls {len(self.connector.calls)}, "
            f"throttled {len(self.connector.throttled)}"
        )

    def decisions(self) -> dict[str, int]:
        """What a decision (or anything it sets off) would change."""
        state = self.server.state()
        return {k: state[k] for k in ("decided", "takeover_votes", "journal", "ledger", "runs")}


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamsTarget]:
    """A server that validates every request's JWT against the local issuer."""
    key = new_key()
    with (
        openid_server(key) as metadata_url,
        on_a_thread(FakeConnector) as connector,
        serve(tmp_path_factory.mktemp("teams"), config_body(teams_config(metadata_url))) as server,
    ):
        target = TeamsTarget(server, connector, key)
        yield target
        print(target.summary("Teams fuzz, tokens checked"))


@pytest.fixture(scope="module")
def open_teams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamsTarget]:
    """A server without ``teams.appId`` but with ``teams.insecureLocalDev`` (the Agents
    Playground's way): its replies need no
    token from Microsoft's login service, so they reach the fake Bot Connector."""
    with (
        on_a_thread(FakeConnector) as connector,
        serve(tmp_path_factory.mktemp("open-teams"), config_body(UNSIGNED)) as server,
    ):
        target = TeamsTarget(server, connector, None)
        yield target
        print(target.summary("Teams fuzz, no app id"))


texts = st.one_of(
    st.sampled_from(COMMANDS),
    st.sampled_from(list(HOSTILE.values())),
    st.text(max_size=200),
    st.just(HUGE),
)


Strategy = st.SearchStrategy[Any]


def mostly(likely: Strategy, rarely: Strategy) -> Strategy:
    """``likely`` three times in four, else ``rarely``."""
    return st.integers(0, 3).flatmap(lambda n: rarely if n == 3 else likely)


def request_ids(real: str, run_id: str, actor: str | None) -> st.SearchStrategy[Any]:
    """The ``requestId`` of a click: unknown ids, junk, and mostly the real pending request
    unless the one clicking may decide it (the fuzz must not decide it)."""
    ids = (
        st.sampled_from(["id-does-not-exist", "", run_id, real + "x", HUGE])
        | st.text(max_size=40)
        | json_values
    )
    return ids if actor in DECIDERS else mostly(st.just(real), ids)


def card_data(ids: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``action.data``: what the card's button carries, and what a deny form adds."""
    return st.fixed_dictionaries(
        {"requestId": ids},
        optional={
            "reason": texts | json_values,
            "runId": st.text(max_size=40) | json_values,
            "stepId": st.sampled_from(["approve", "act"]) | st.text(max_size=20),
            "score": st.integers(-10, 10) | json_values,
        },
    )


@st.composite
def card_value(draw: st.DrawFn, ids: st.SearchStrategy[Any]) -> Any:
    """An ``adaptiveCard/action`` invoke's ``value``: mostly well formed (the click of a
    real button, with a known or unknown verb), else half formed (any key may be missing or of
    the wrong type), else junk."""
    shape = draw(st.sampled_from(["button", "button", "button", "half", "junk"]))
    if shape == "junk":
        return draw(json_values)
    verb = draw(mostly(st.sampled_from(VERBS), st.text(max_size=20)))
    if shape == "button":
        return {
            "action": {"type": "Action.Execute", "verb": verb, "data": draw(card_data(ids))},
            "trigger": "manual",
        }
    action = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "type": st.just("Action.Execute") | json_values,
                "verb": st.just(verb) | json_values,
                "data": card_data(ids) | json_values,
            },
        )
    )
    return draw(
        st.fixed_dictionaries(
            {}, optional={"action": st.just(action) | json_values, "trigger": json_values}
        )
    )


@st.composite
def activities(draw: st.DrawFn, teams: TeamsTarget) -> dict[str, Any]:
    """One activity as Teams would send it, then bent by the draws."""
    actor = draw(st.sampled_from(ACTORS))
    kind, conversation = draw(
        st.sampled_from(
            [("channel", CHANNEL), ("personal", PERSONAL), ("groupChat", "19:group@thread.v2")]
        )
    )
    if draw(st.booleans()):  # a conversation of its own: the bot paces replies per conversation
        conversation = f"19:fuzz-{next(teams.conversations)}@thread.v2"
    activity = teams.builder._base(conversation=conversation, kind=kind, user=actor)
    what = draw(st.sampled_from(KINDS))
    teams.kinds[what] += 1
    if what == "message":
        activity.update(type="message", text=draw(texts))
    elif what == "click":
        server = teams.server
        value = draw(card_value(request_ids(server.request_id, server.run_id, actor)))
        activity.update(type="invoke", name="adaptiveCard/action", value=value)
        if server.request_id in json.dumps(value):
            teams.kinds["click on the pending request"] += 1
    elif what == "invoke":
        activity.update(
            type="invoke",
            name=draw(
                st.sampled_from(["composeExtension/query", "task/fetch", "signin/verifyState", ""])
                | st.text(max_size=30)
            ),
            value=draw(json_values),
        )
    elif what in ("conversationUpdate", "installationUpdate"):
        members = st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.sampled_from([activity["recipient"]["id"], "29:someone"])
                    | st.text(max_size=10)
                }
            ),
            max_size=3,
        )
        activity.update(
            type=what,
            membersAdded=draw(members),
            action=draw(st.sampled_from(["add", "remove", "add-upgrade"])),
        )
    else:
        activity["type"] = draw(
            st.sampled_from(["typing", "event", "messageReaction", "endOfConversation", "trace"])
            | st.text(min_size=1, max_size=20)
        )
    return activity


def bend(data: st.DataObject, activity: dict[str, Any]) -> bool:
    """Now and then put junk into one or two top-level fields; True when it did."""
    if data.draw(st.integers(0, 3)) != 3:
        return False
    names = data.draw(st.lists(st.sampled_from(JUNK_FIELDS), min_size=1, max_size=2, unique=True))
    for name in names:
        # Only addresses that cannot leave the machine: a reply goes to the serviceUrl.
        junk = st.sampled_from(SERVICE_URLS) if name == "serviceUrl" else json_values | texts
        activity[name] = data.draw(junk)
    return True


def bad_authorization(teams: TeamsTarget, case: str) -> str | None:
    if case == "missing":
        return None
    if case == "garbage":
        return "Bearer not.a.jwt"
    if case == "not bearer":
        return "Basic " + token(teams.key, teams.connector.service_url)
    return "Bearer " + bad_token(case, teams.key, teams.connector.service_url, teams.other_key)


@given(data=st.data(), case=st.sampled_from(["missing", "garbage", "not bearer", *BAD_TOKENS]))
@FUZZ
def test_without_a_valid_token_nothing_changes(
    teams: TeamsTarget, data: st.DataObject, case: str
) -> None:
    activity = data.draw(activities(teams))
    # The token is checked before the body is read; only one valid but for another serviceUrl
    # (which is matched against the activity) lets a body that is no activity get its 400.
    bent = bend(data, activity)
    refusals = {400, 401} if bent and case == "other url" else {401}
    before = teams.server.state()
    status = teams.post(activity, bad_authorization(teams, case), "no valid token")
    teams.server.assert_quiet()
    assert status in refusals, (case, status)
    assert teams.server.state() == before, case


@given(data=st.data())
@FUZZ
def test_with_a_valid_token_never_5xx_and_no_unauthorized_decision(
    teams: TeamsTarget, data: st.DataObject
) -> None:
    never_5xx_and_no_decision(teams, data, "valid token")


@given(data=st.data())
@FUZZ
def test_without_an_app_id_never_5xx_and_no_unauthorized_decision(
    open_teams: TeamsTarget, data: st.DataObject
) -> None:
    never_5xx_and_no_decision(open_teams, data, "no app id")


def never_5xx_and_no_decision(teams: TeamsTarget, data: st.DataObject, tally: str) -> None:
    activity = data.draw(activities(teams))
    bend(data, activity)
    before = teams.decisions()
    status = teams.post(activity, teams.valid(), tally)
    teams.server.assert_quiet()
    assert status < 500, status
    assert teams.decisions() == before
