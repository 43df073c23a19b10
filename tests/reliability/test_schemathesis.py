"""schemathesis against a real ``signoff serve`` (SQLite): every operation of the API document
is called with generated parameters and bodies (schema-valid and schema-breaking ones, in
schemathesis's examples, coverage and fuzzing phases), once with an admin token and once with
no token.

Expected for every call: every check schemathesis has passes (among them no 5xx, a documented
status code, a body valid against the documented response schema in the documented content
type, a 4xx for a request that breaks the schema, no 400 for one the schema allows, an Allow
header on 405, a 401 once the credentials are taken off), and no traceback in the server's log.
No check is left out, for any operation. A stored workflow's graph and reference rules are no
JSON Schema's (unknown connector, dangling ``next``...): POST /v1/workflows refuses a
schema-valid body that breaks them with 422 ``invalid_config``, never 400, so for that one
operation ``positive_data_acceptance`` also counts 422 as the request understood (``CONFIG``,
which a ``schemathesis run`` needs as well; see docs/security.md).

Without a token, every operation that declares ``security`` answers 401 (405
to a method its path does not have) and changes nothing. Every other schema-valid call on a
run's paths names the run the server has parked, so real records meet the response schemas.

The document is built from the route table at import, because schemathesis parametrizes tests
at collection, before the server runs (its lazy ``schemathesis.pytest.from_fixture`` loader
fails under pytest 9.2: it renames test nodes through ``Node._nodeid``, which pytest dropped);
the first test proves it equal to the document the running server serves.

Examples per operation and token: 25 in CI, 250 under ``SIGNOFF_RELIABILITY_FULL=1`` (plus the
coverage phase's deterministic cases).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS as REGISTERED
from schemathesis.checks import load_all_checks
from schemathesis.config import SchemathesisConfig

from bot.api import route_tables
from bot.api.openapi import document
from tests.reliability.cluster import size
from tests.reliability.served import Target

DOCUMENT = document([route for table in route_tables() for route in table.routes])
# A workflow's graph rules (unique ids, edges to real nodes, no cycles, templates that parse) and
# its references to the configuration (connectors, people, webhooks) are the engine's, and no
# JSON Schema says them: a schema-valid workflow may be refused for them, with 422 naming each
# problem. Every other refusal of a schema-valid body still fails the check (a 400 above all).
# So are an absence's (an ``until`` that is a time, ahead and within a year; a delegate of
# ``people:``): 422 there too.
SEMANTIC = (("POST", "/v1/workflows"), ("PUT", "/v1/people/{name}/away"))
ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]
CONFIG = SchemathesisConfig.from_dict(
    {
        "operations": [
            {
                "include-method": method,
                "include-path": path,
                "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED}},
            }
            for method, path in SEMANTIC
        ]
    }
)
schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)

EXAMPLES = size(ci=25, full=250)
GENERATED = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
load_all_checks()
CHECKS = REGISTERED.get_all()  # every check schemathesis has, not only "no 5xx"
STATUSES: dict[str, Counter[int]] = {}  # "admin"|"none" -> status code -> calls, printed
FAILED: Counter[str] = Counter()  # "admin"|"none" -> calls a check failed on, printed
FLIP = itertools.count()


class AdminToken:
    """Credentials set the way schemathesis sets them, so that it leaves them off the cases
    that test a missing or broken Authorization header. schemathesis builds some cases before
    the server (and its token) exists, so this sets a stand-in that ``call`` replaces."""

    STAND_IN = "Bearer the-admin-token"

    def get(self, case: schemathesis.Case, context: schemathesis.AuthContext) -> str:
        return self.STAND_IN

    def set(self, case: schemathesis.Case, data: str, context: schemathesis.AuthContext) -> None:
        case.headers = {**(case.headers or {}), "Authorization": data}


@pytest.fixture(scope="module", autouse=True)
def histogram() -> Iterator[None]:
    """Print the status codes the calls met, once the module is done (``-s`` shows it)."""
    yield
    for token, statuses in sorted(STATUSES.items()):
        print(
            f"\nschemathesis, token {token}: {sum(statuses.values())} calls, "
            f"{FAILED[token]} failed, statuses {dict(sorted(statuses.items()))}"
        )


def test_the_server_serves_the_document_under_test(target: Target) -> None:
    assert target.openapi == DOCUMENT


@schema.parametrize()
@schema.auth.apply(AdminToken)
@GENERATED
def test_with_an_admin_token(case: schemathesis.Case, target: Target) -> None:
    call(case, target, "admin")


@schema.parametrize()
@GENERATED
def test_without_a_token(case: schemathesis.Case, target: Target) -> None:
    secured = bool(case.operation.definition.raw.get("security"))
    # The coverage phase also sends methods the path does not have: those are 405 first.
    own_method = case.method.upper() == case.operation.method.upper()
    before = target.state() if secured else None
    status = call(case, target, "none")
    if before is not None:
        assert status == 401 if own_method else status in (401, 405), (case.method, status)
        assert target.state() == before, case.operation.label


def aim(case: schemathesis.Case, target: Target) -> None:
    """Every other schema-valid case on a run's paths names the parked run (and its request):
    made-up ids only ever meet a 404, and the response schemas of the real records would go
    unchecked."""
    params = case.path_parameters or {}
    valid = case.meta is not None and not case.meta.generation.mode.is_negative
    if valid and "id" in params and next(FLIP) % 2:
        real = {"id": target.run_id, "tkId": target.request_id}
        case.path_parameters = {name: real.get(name, value) for name, value in params.items()}


def call(case: schemathesis.Case, target: Target, tally: str) -> int:
    """Send ``case``, run ``CHECKS`` on the answer, and look for a traceback in the server's
    log; the status is counted under ``tally``."""
    aim(case, target)
    if case.headers and case.headers.get("Authorization") == AdminToken.STAND_IN:
        case.headers["Authorization"] = f"Bearer {target.tokens['admin']}"
    try:
        response = case.call_and_validate(base_url=target.base, checks=CHECKS, timeout=30)
    except Exception:
        FAILED[tally] += 1
        raise
    if response.status_code == 422:  # only the rules no schema can say, each named
        operation = (case.method.upper(), case.operation.path)
        assert operation in SEMANTIC, response.text
        answer = response.json()
        if operation == SEMANTIC[0]:
            assert answer["error"] == "invalid_config" and answer["problems"], response.text
        else:
            assert answer["error"] == "invalid_request" and answer["message"], response.text
    STATUSES.setdefault(tally, Counter())[response.status_code] += 1
    target.assert_quiet()
    return int(response.status_code)
