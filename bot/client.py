"""A small async client for agents: make a held call and wait for its outcome.

    from bot.client import SignoffClient, requires_approval

    signoff = SignoffClient("https://signoff.example.com", token="so_...")
    result = await signoff.call("mailer", "send", {"to": ["a@example.com"], "subject": "Hi"})

    @requires_approval(connector="demo-ledger", action="refund", client=signoff)
    async def refund(order: str, amount: float) -> str: ...   # runs once allowed or approved

``call`` posts ``/v1/calls`` and, while the call is held or running, long-polls
``GET /v1/calls/{executionId}?wait=...`` until the outcome; it returns the connector's result or
raises. A held call is never silent: it tells the caller where a person decides, once, by
calling ``on_hold(Hold)`` (a plain or async function, given to the client or to one call), or,
without one, by logging the approval URL as a warning of the ``bot.client`` logger::

    def tell(hold: Hold) -> None:
        print(f"{hold.connector}.{hold.action} waits for a decision: {hold.approval_url}")

    signoff = SignoffClient(url, token, on_hold=tell)

``requires_approval`` sends the function's arguments as a call in ``approve_only`` mode:
the server records the decision and calls nothing, and the function runs here, once approved.

The errors, one tree:

    SignoffClientError
    ├── CallBlocked(rule, message)           a block rule refused the call (HTTP 403)
    ├── ApprovalDenied(reason, decided_by)   a person denied it
    ├── ApprovalExpired(execution_id)        nobody decided before it expired
    ├── CallFailed(error)                    the connector failed, or the run was cancelled
    ├── CallStillPending(execution_id)       wait_seconds ran out before an outcome
    └── ApiError(status, code, message)      any other error answer (bad token, bad body ...)

Only ``aiohttp`` is needed: the client does not import the engine.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import aiohttp

__all__ = [
    "ApiError",
    "ApprovalDenied",
    "ApprovalExpired",
    "CallBlocked",
    "CallFailed",
    "CallStillPending",
    "Hold",
    "OnHold",
    "SignoffClient",
    "SignoffClientError",
    "requires_approval",
]

P = ParamSpec("P")
R = TypeVar("R")

_POLL_SECONDS = 30  # each long poll; the server allows up to 60
_OPEN = ("pending_approval", "running")
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Hold:
    """A call held for a person's decision, and where they make it."""

    connector: str
    action: str
    execution_id: str
    approval_url: str | None  # the page where an approver decides
    summary: str | None  # what the approval card says the call does
    expires_at: str | None  # ISO 8601: the call expires undecided then


OnHold = Callable[[Hold], Awaitable[None] | None]


class SignoffClientError(Exception):
    """Every error this client raises."""


class CallBlocked(SignoffClientError):
    def __init__(self, rule: str | None, message: str) -> None:
        super().__init__(message)
        self.rule = rule


class ApprovalDenied(SignoffClientError):
    def __init__(self, reason: str | None, decided_by: str | None) -> None:
        super().__init__(f"denied by {decided_by or 'an approver'}: {reason or 'no reason given'}")
        self.reason = reason
        self.decided_by = decided_by


class ApprovalExpired(SignoffClientError):
    def __init__(self, execution_id: str, reason: str | None = None) -> None:
        super().__init__(reason or f"call {execution_id} expired before anyone decided")
        self.execution_id = execution_id


class CallFailed(SignoffClientError):
    def __init__(self, error: str, execution_id: str | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.execution_id = execution_id


class CallStillPending(SignoffClientError):
    def __init__(self, execution_id: str) -> None:
        super().__init__(f"call {execution_id} has no outcome yet")
        self.execution_id = execution_id


class ApiError(SignoffClientError):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code


class SignoffClient:
    """Talks to one Signoff server with one agent token. Pass ``session`` to share an
    ``aiohttp.ClientSession``; otherwise one is opened on first use (``close`` it, or use
    ``async with``). ``on_hold`` is told where to decide each held call (default: a logged
    warning with the approval URL)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        session: aiohttp.ClientSession | None = None,
        on_hold: OnHold | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.on_hold = on_hold
        self._session = session
        self._own_session = session is None

    async def __aenter__(self) -> SignoffClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    async def call(
        self,
        connector: str,
        action: str,
        args: dict[str, Any] | None = None,
        *,
        account: str | None = None,
        reason: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        callback_url: str | None = None,
        idempotency_key: str | None = None,
        approve_only: bool = False,
        wait_seconds: float | None = None,
        on_hold: OnHold | None = None,
    ) -> Any:
        """Make the call and wait for its outcome: the connector's result (``None`` for an
        ``approve_only`` call once approved). ``wait_seconds`` bounds the whole wait (None:
        until the server reports an outcome; an undecided call expires on its own).
        ``on_hold`` (default: the client's) is told once if the call is held."""
        body: dict[str, Any] = {"connector": connector, "action": action, "args": args or {}}
        optional = {
            "account": account,
            "reason": reason,
            "agent": agent,
            "session": session,
            "callbackUrl": callback_url,
            "idempotencyKey": idempotency_key,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        if approve_only:
            body["mode"] = "approve_only"
        loop = asyncio.get_running_loop()
        deadline = None if wait_seconds is None else loop.time() + wait_seconds
        first = _poll_seconds(deadline, loop.time())
        status, answer = await self._request("POST", f"/v1/calls?wait={first}", body)
        if status == 403 and answer.get("status") == "blocked":
            raise CallBlocked(answer.get("rule"), answer.get("message") or "blocked")
        if status not in (200, 202, 502):
            _raise_api_error(status, answer)
        told = False
        while answer.get("status") in _OPEN:
            execution_id = str(answer["executionId"])
            if answer.get("status") == "pending_approval" and not told:
                told = True
                await _tell(_hold(connector, action, answer), on_hold or self.on_hold)
            if deadline is not None and loop.time() >= deadline:
                raise CallStillPending(execution_id)
            wait = _poll_seconds(deadline, loop.time())
            status, answer = await self._request("GET", f"/v1/calls/{execution_id}?wait={wait}")
            if status != 200:
                _raise_api_error(status, answer)
        return _outcome(answer)

    async def approve(self, connector: str, action: str, args: dict[str, Any], **kw: Any) -> None:
        """Wait for a person to approve this exact call without the server running anything
        (``approve_only``); returns once approved, raises otherwise."""
        await self.call(connector, action, args, approve_only=True, **kw)

    async def status(self, execution_id: str, *, wait: int = 0) -> dict[str, Any]:
        """The raw ``GET /v1/calls/{executionId}`` answer."""
        status, answer = await self._request("GET", f"/v1/calls/{execution_id}?wait={wait}")
        if status != 200:
            _raise_api_error(status, answer)
        return answer

    async def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=_POLL_SECONDS * 2 + 30)
            )
        headers = {"Authorization": f"Bearer {self.token}"}
        async with self._session.request(
            method, self.base_url + path, json=body, headers=headers
        ) as resp:
            try:
                answer = await resp.json(content_type=None)
            except (aiohttp.ContentTypeError, ValueError):
                answer = {"error": "http_error", "message": (await resp.text())[:300]}
            if not isinstance(answer, dict):
                answer = {"error": "http_error", "message": "unexpected answer"}
            return resp.status, answer


def _hold(connector: str, action: str, answer: dict[str, Any]) -> Hold:
    def text(key: str) -> str | None:
        value = answer.get(key)
        return value if isinstance(value, str) else None

    return Hold(
        connector,
        action,
        str(answer["executionId"]),
        text("approvalUrl"),
        text("approvalSummary"),
        text("expiresAt"),
    )


async def _tell(hold: Hold, on_hold: OnHold | None) -> None:
    if on_hold is None:
        log.warning(
            "%s.%s is waiting for a person to decide: %s (expires %s)",
            hold.connector,
            hold.action,
            hold.approval_url or f"call {hold.execution_id}",
            hold.expires_at or "when approvals.ttl says",
        )
        return
    told = on_hold(hold)
    if inspect.isawaitable(told):
        await told


def _poll_seconds(deadline: float | None, now: float) -> int:
    if deadline is None:
        return _POLL_SECONDS
    return max(0, min(_POLL_SECONDS, int(deadline - now)))


def _outcome(answer: dict[str, Any]) -> Any:
    status = answer.get("status")
    execution_id = str(answer.get("executionId"))
    if status in ("executed", "approved"):
        return answer.get("result")
    if status == "denied":
        raise ApprovalDenied(answer.get("reason"), answer.get("decidedBy"))
    if status == "expired":
        raise ApprovalExpired(execution_id, answer.get("reason"))
    if status in ("failed", "cancelled"):
        error = answer.get("message") or answer.get("reason") or str(status)
        raise CallFailed(str(error), execution_id)
    raise SignoffClientError(f"unexpected call status {status!r}")


def _raise_api_error(status: int, answer: dict[str, Any]) -> None:
    raise ApiError(status, str(answer.get("error", "error")), str(answer.get("message", "")))


def requires_approval(
    *,
    connector: str,
    action: str,
    client: SignoffClient,
    reason: str | None = None,
    account: str | None = None,
    wait_seconds: float | None = None,
    on_hold: OnHold | None = None,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Turn an async function into a held call: each call sends the function's arguments (by
    parameter name; they must be JSON values) as ``connector.action`` in ``approve_only`` mode.
    The policy decides as for any call; once it allows (or a person approves) the function runs
    here; a block, denial or expiry raises and the function does not run. ``on_hold``
    (default: the client's) is told where to decide while it is held."""

    def decorate(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        async def held(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            await client.approve(
                connector,
                action,
                dict(bound.arguments),
                reason=reason,
                account=account,
                wait_seconds=wait_seconds,
                on_hold=on_hold,
            )
            return await fn(*args, **kwargs)

        return held

    return decorate
