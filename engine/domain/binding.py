"""The binding of an approval to one exact call: connector, action, canonical arguments, account.
A changed argument changes the hash and needs a new approval."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON: the same value always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def binding_hash(
    connector: str | None, action: str | None, args: Any, account: str | None = None
) -> str:
    payload = canonical_json(
        {"connector": connector, "action": action, "args": args, "account": account}
    )
    return hashlib.sha256(payload.encode()).hexdigest()
