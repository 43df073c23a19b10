"""Signed callbacks: a held call's outcome POSTed to the ``callbackUrl`` its agent gave.

The interpreter writes an outbox message on channel ``callback:<executionId>`` in the same
transaction that makes the run final, so an outcome is neither lost nor announced twice by a
crash; the outbox dispatcher delivers it through ``CallbackSink`` with its usual retries. The
body is built at delivery from the stored run and request (``engine.domain.calls_view``), exactly
what ``GET /v1/calls/{id}`` answers: ``{executionId, status, result | reason, decidedBy?}``.

Signature: ``X-Signoff-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``,
keyed by ``server.secretKey``. A receiver recomputes it over the raw body (``verify``) and should
refuse a ``t`` far from its own clock (replays). With an empty secret key the sink signs with a
random per-process key and warns: the header is present but no receiver can verify it.

Responses: 2xx is delivered; 4xx other than 408 and 429 is a permanent failure (the receiver
refused it: retrying will not help), and so is a redirect (never followed: the URL the agent gave
is the only one called); anything else, and network errors, are retried (``Retry-After``
honoured). The URLs are called from the server, never at an internal address unless
``server.allowInternalTargets`` lists it (``engine.domain.outbound``: checked when the URL arrives
and, by ``engine.adapters.outbound``, again on the address each connection opens to), through the
proxy that curl's ``NO_PROXY`` rules choose (``engine.domain.proxies``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets

import aiohttp

from engine.adapters.outbound import OutboundGuard, RefusedTarget
from engine.domain.calls_view import call_view
from engine.domain.errors import DeliveryError, InvalidRequest, NotFound
from engine.domain.model import OutboxRecord
from engine.ports import Clock
from engine.ports.deliveries import CallbackReads

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Signoff-Signature"
_RETRY_4XX = {408, 429}


def signature(key: bytes, timestamp: int, body: bytes) -> str:
    """The header value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(key, str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(key: bytes, header: str, body: bytes) -> int | None:
    """The signed timestamp when ``header`` is a valid signature of ``body``; else None.
    (Freshness is the receiver's to judge against its own clock.)"""
    fields = dict(part.partition("=")[::2] for part in header.split(","))
    try:
        timestamp = int(fields.get("t", ""))
    except ValueError:
        return None
    expected = signature(key, timestamp, body)
    return timestamp if hmac.compare_digest(expected, header.strip()) else None


class CallbackSink:
    """The outbox sink of platform ``callback``: one POST per held-call outcome."""

    min_interval = 0.0  # one message per channel (per execution): nothing to pace

    def __init__(
        self,
        store: CallbackReads,
        clock: Clock,
        secret_key: str,
        *,
        guard: OutboundGuard | None = None,
        timeout_seconds: float = 10.0,
    ) -> None:
        self.store = store
        self.guard = guard or OutboundGuard()
        self.clock = clock
        if secret_key:
            self.key = secret_key.encode()
        else:
            self.key = secrets.token_bytes(32)
            log.warning(
                "server.secretKey is empty: callbacks are signed with a per-process random key "
                "that receivers cannot verify (set SIGNOFF_SECRET_KEY)"
            )
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)

    async def body(self, execution_id: str) -> bytes:
        """The callback body for a call as it stands now."""
        run = await self.store.get_run(execution_id)
        request = await self.store.call_request(run.id)
        view = call_view(run, request, self.clock.now())
        return json.dumps(view.as_json(), separators=(",", ":"), default=str).encode()

    async def deliver(self, message: OutboxRecord) -> None:
        url = message.payload.get("url")
        execution_id = message.payload.get("executionId")
        if not isinstance(url, str) or not isinstance(execution_id, str):
            raise DeliveryError("a callback message needs url and executionId", permanent=True)
        try:
            self.guard.check_url(url)  # again: the allow-list may have changed since
            body = await self.body(execution_id)
        except (NotFound, InvalidRequest) as exc:
            raise DeliveryError(exc.message, permanent=True) from exc
        timestamp = int(self.clock.now().timestamp())
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(self.key, timestamp, body),
            "User-Agent": "signoff-callback/1",
        }
        try:
            async with (
                self.guard.session(timeout=self.timeout) as session,
                session.post(url, data=body, headers=headers, allow_redirects=False) as resp,
            ):
                if 200 <= resp.status < 300:
                    return
                text = (await resp.text())[:200]
                problem = f"callback to {url} answered HTTP {resp.status}: {text}"
                if resp.status < 500 and resp.status not in _RETRY_4XX:  # 3xx: not followed
                    raise DeliveryError(problem, permanent=True)
                raise DeliveryError(problem, retry_after=_retry_after(resp))
        except aiohttp.InvalidURL as exc:  # e.g. a host yarl refuses: no retry will mend it
            raise DeliveryError(f"callback to {url}: invalid URL: {exc}", permanent=True) from exc
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, RefusedTarget):  # it will not become public by waiting
                raise DeliveryError(f"callback to {url}: {exc.os_error}", permanent=True) from exc
            raise DeliveryError(f"callback to {url}: {type(exc).__name__}: {exc}") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DeliveryError(f"callback to {url}: {type(exc).__name__}: {exc}") from exc


def _retry_after(resp: aiohttp.ClientResponse) -> float | None:
    raw = resp.headers.get("Retry-After")
    if raw is None:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        return None
