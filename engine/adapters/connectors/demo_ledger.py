"""The demo ledger: a connector whose every call is a row, so side effects can be counted."""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from engine.domain.errors import ConnectorError
from engine.ports import Clock, ConnectorCall


class LedgerWriter(Protocol):
    async def record_ledger(
        self,
        connector: str,
        action: str,
        args: dict[str, Any],
        idempotency_key: str,
        now: Any,
        *,
        run_id: str | None = None,
        step_id: str | None = None,
    ) -> int: ...


class DemoLedger:
    """Actions: ``lookup`` (an order's made-up details), ``refund``, ``note``; anything else is
    recorded too. Every call is written with its idempotency key and time."""

    def __init__(self, name: str, store: LedgerWriter, clock: Clock) -> None:
        self.name = name
        self.store = store
        self.clock = clock

    async def call(self, call: ConnectorCall) -> Any:
        args = dict(call.args)
        entry = await self.store.record_ledger(
            self.name,
            call.action,
            args,
            call.idempotency_key,
            self.clock.now(),
            run_id=call.run_id,
            step_id=call.step_id,
        )
        if call.action == "lookup":
            order = str(args.get("order", ""))
            if not order:
                raise ConnectorError("lookup needs an order", retryable=False)
            digest = int(hashlib.sha256(order.encode()).hexdigest()[:8], 16)
            return {
                "order": order,
                "customer": f"customer-{digest % 1000:03d}",
                "amount": round(10 + (digest % 9000) / 100, 2),
                "currency": "EUR",
                "entry": entry,
            }
        return {"entry": entry, "action": call.action, "recorded": True}
