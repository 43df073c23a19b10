"""The ``webhook:<name>`` channel: approvals POSTed as JSON to a URL of the team's choosing.

For teams that route approvals elsewhere (a ticketing tool, their own bot). ``app.yaml``:

    webhooks:
      ops: {url: https://hooks.example.com/signoff, secret: "${OPS_WEBHOOK_SECRET}"}

Every outbox message of the channel (a new card, a card update, a notice) becomes one POST of

    {"event": "card" | "card_update" | "notice", "notice": <kind> | null,
     "deliveryId": <dedupe key>, "runId": ..., "approval": <the approval view> | null,
     "links": {<person>: <signed approval link>, ...}, "data": <a notice's own fields>}

built at delivery from the stored request, so a late or retried delivery carries the current
state. ``links`` holds one signed link per person who may still decide (empty once decided).
With a secret, ``X-Signoff-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`` (the
format of ``engine.adapters.callbacks``); ``X-Signoff-Delivery`` repeats the delivery id so a
receiver can drop a retried duplicate. 2xx is delivered; a 4xx other than 408/429, or a redirect
(never followed), fails for good; anything else is retried by the outbox with backoff, honouring
``Retry-After``.

The approval view's JSON and the signed links are handed in (``bot.webhook`` builds them with
``cards.json_view`` and ``engine.services.links``); the store is read through
``engine.ports.deliveries.RequestReads``, the signature and the HTTP session come from
``engine.assembly`` (a front end never imports ``engine.adapters``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from engine.assembly import SIGNATURE_HEADER, http_session, signature
from engine.config.channels import WebhookConfig
from engine.domain.errors import DeliveryError, NotFound
from engine.domain.model import OutboxRecord, Run, TakeoverRequest
from engine.domain.proxies import ProxySettings
from engine.ports import Clock
from engine.ports.deliveries import RequestReads

DELIVERY_HEADER = "X-Signoff-Delivery"
_RETRY_4XX = {408, 429}

ViewJson = Callable[[TakeoverRequest, Run | None], Mapping[str, Any]]
Links = Callable[[TakeoverRequest], Mapping[str, str]]


class WebhookSink:
    """The outbox sink of platform ``webhook``."""

    min_interval = 0.0  # a receiver that wants pacing answers 429 with Retry-After

    def __init__(
        self,
        webhooks: Mapping[str, WebhookConfig],
        store: RequestReads,
        clock: Clock,
        *,
        view_json: ViewJson,
        links: Links,
        timeout_seconds: float = 10.0,
        proxies: ProxySettings | None = None,
    ) -> None:
        self.webhooks = dict(webhooks)
        self.store = store
        self.clock = clock
        self.view_json = view_json
        self.links = links
        self.timeout_seconds = timeout_seconds
        self.proxies = proxies or ProxySettings()

    async def body(self, message: OutboxRecord) -> bytes:
        """The JSON body for ``message`` as things stand now."""
        request_id = message.request_id or message.payload.get("requestId")
        approval: Mapping[str, Any] | None = None
        links: Mapping[str, str] = {}
        if isinstance(request_id, str):
            request = await self.store.get_takeover(request_id)
            try:
                run: Run | None = await self.store.get_run(request.run_id)
            except NotFound:
                run = None
            approval = self.view_json(request, run)
            links = {} if request.is_final else self.links(request)
        is_notice = message.kind == "notice"
        data = {k: v for k, v in message.payload.items() if k != "notice"} if is_notice else {}
        document = {
            "event": message.kind,
            "notice": message.payload.get("notice") if is_notice else None,
            "deliveryId": message.dedupe_key,
            "runId": message.run_id,
            "approval": approval,
            "links": dict(links),
            "data": data,
        }
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()

    async def deliver(self, message: OutboxRecord) -> None:
        name = message.channel.partition(":")[2]
        hook = self.webhooks.get(name)
        if hook is None:
            raise DeliveryError(f"no webhook named {name!r} in app.yaml", permanent=True)
        try:
            body = await self.body(message)
        except NotFound as exc:
            raise DeliveryError(exc.message, permanent=True) from exc
        headers = {
            "Content-Type": "application/json",
            DELIVERY_HEADER: message.dedupe_key,
            "User-Agent": "signoff-webhook/1",
        }
        if hook.secret:
            stamp = int(self.clock.now().timestamp())
            headers[SIGNATURE_HEADER] = signature(hook.secret.encode(), stamp, body)
        try:
            async with (
                http_session(self.proxies, timeout_seconds=self.timeout_seconds) as session,
                session.post(hook.url, data=body, headers=headers, allow_redirects=False) as resp,
            ):
                if 200 <= resp.status < 300:
                    return
                text = (await resp.text())[:200]
                problem = f"webhook {name} answered HTTP {resp.status}: {text}"
                if resp.status < 500 and resp.status not in _RETRY_4XX:
                    raise DeliveryError(problem, permanent=True)
                raise DeliveryError(problem, retry_after=_retry_after(resp))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DeliveryError(f"webhook {name}: {type(exc).__name__}: {exc}") from exc


def _retry_after(resp: aiohttp.ClientResponse) -> float | None:
    """``Retry-After`` in seconds (the HTTP-date form is rare from webhooks: backoff instead)."""
    raw = resp.headers.get("Retry-After", "")
    try:
        return max(float(raw), 0.0)
    except ValueError:
        return None
