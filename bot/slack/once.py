"""Each signed Slack request acts once: a replay is acknowledged (200) and does nothing.

A Slack signature is valid for 5 minutes (bolt refuses an older timestamp), and within them
anyone who saw the bytes of a request can send them again: a ``/signoff gate off``, a deny
modal's submission, an @mention. ``ActOnce`` is a bolt middleware, so it runs after bolt's own
verification (only signed, timely requests reach it) and before any listener. It names the
request by a key and asks the engine whether that key is new (``ReplayGuard``: an
insert-if-absent in the database, so it holds across replicas and restarts):

* an event (``event_callback``) by its ``event_id``: a replay and Slack's own retries of the
  event (``X-Slack-Retry-Num``, minutes apart, re-signed) carry the same id;
* everything else (slash commands, button clicks, view submissions) by its signature, which
  is one HMAC per timestamp and body: the same bytes, the same key. Slack's other ids do not
  fit as well: a modal resubmitted after a validation error keeps its view id and hash.
* over Socket Mode (``bot/slack/socket.py``) nothing is signed: the socket itself is Slack,
  and only Slack redelivers. A redelivered envelope carries the same payload (each click,
  command or submission has its own ``trigger_id`` and times in it), so the payload's hash
  names it. Events keep their ``event_id``, so an event and its retry are one key whichever
  way each arrived.

A key seen before gets an empty 200, so a retry is never turned into an error. When the
database cannot say, nothing acts: a slash command is told so (an ephemeral answer), anything
else gets a 503, which Slack retries for events.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta

from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from engine.domain.errors import SignoffError
from engine.services.replays import ReplayGuard

log = logging.getLogger(__name__)

# A request is accepted while its timestamp is within 5 minutes of now: one accepted at ``now``
# may come again until ``now + 10 min``. Five more cover clocks that disagree a little.
SIGNED_KEEP = timedelta(minutes=15)
# Slack retries an event at once, after 1 minute and after 5 (each re-signed, same event_id);
# a Socket Mode envelope comes again when it was not acknowledged, on the next socket.
EVENT_KEEP = timedelta(hours=1)
UNRECORDED = "Signoff could not record this request just now, so it did nothing. Try again."


def request_key(req: AsyncBoltRequest) -> tuple[str, timedelta] | None:
    """The key naming this request and how long to keep it; None for a request with no
    signature (bolt refused those already; a test app may run without verification)."""
    body = req.body if isinstance(req.body, dict) else {}
    event_id = body.get("event_id")
    if body.get("type") == "event_callback" and isinstance(event_id, str) and event_id:
        if len(event_id) > 100:  # Slack's are ~12 characters; the key column holds 300
            event_id = hashlib.sha256(event_id.encode()).hexdigest()
        return f"slack:event:{event_id}", EVENT_KEEP
    signature = (req.headers.get("x-slack-signature") or [""])[0]
    if signature:
        return f"slack:signature:{signature}", SIGNED_KEEP
    if req.mode == "socket_mode" and body:
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return f"slack:socket:{hashlib.sha256(canonical.encode()).hexdigest()}", EVENT_KEEP
    return None


class ActOnce(AsyncMiddleware):
    """Lets the first delivery of a signed request through to the listeners; answers a replay."""

    def __init__(self, replays: ReplayGuard) -> None:
        self.replays = replays

    async def async_process(
        self,
        *,
        req: AsyncBoltRequest,
        resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],
    ) -> BoltResponse | None:
        found = request_key(req)
        if found is None:
            return await next()
        key, keep = found
        try:
            first = await self.replays.first(key, keep)
        except SignoffError as exc:
            log.warning("Slack request not acted on, its key not recorded: %s", exc)
            if isinstance(req.body, dict) and "command" in req.body:
                return BoltResponse(
                    status=200, body={"response_type": "ephemeral", "text": UNRECORDED}
                )
            return BoltResponse(status=503, body={"error": "unavailable", "message": UNRECORDED})
        if not first:
            log.info("a Slack request seen before (%s): acknowledged, not acted on", key[:40])
            return BoltResponse(status=200, body="")
        return await next()
