"""The Teams card size limit, measured the way Teams may count it.

A card is measured as its JSON reads, unescaped: the larger of its UTF-16 size (what
Teams documents for the message limit) and its UTF-8 bytes. Counting ``\\uXXXX``
escapes instead made a CJK character cost 6 bytes (12 in the arguments' budget) where it
takes 3: a card of Chinese arguments was cut at a quarter of the room it has.

Sources: the message limit counts the payload encoded as UTF-16
(https://learn.microsoft.com/microsoftteams/platform/bots/how-to/format-your-bot-messages);
posting cards fails above about 28 KB (https://learn.microsoft.com/connectors/teams/ "Known
issues and limitations").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

TEAMS_MAX_CARD_BYTES = 28_000


def teams_card_bytes(card: Mapping[str, Any]) -> int:
    """A card's size as Teams may count it: its compact, unescaped JSON in UTF-16 or in
    UTF-8, whichever is larger."""
    return teams_text_bytes(json.dumps(card, separators=(",", ":"), ensure_ascii=False))


def teams_text_bytes(text: str) -> int:
    """``text`` in UTF-16 or in UTF-8, whichever is larger (``teams_card_bytes``)."""
    return max(
        len(text.encode("utf-16-le", "surrogatepass")), len(text.encode("utf-8", "surrogatepass"))
    )


def check_teams_card(card: Mapping[str, Any]) -> list[str]:
    """Size problems of an Adaptive Card for Teams (schema validity is checked in tests)."""
    size = teams_card_bytes(card)
    if size > TEAMS_MAX_CARD_BYTES:
        return [f"card: {size} bytes, limit {TEAMS_MAX_CARD_BYTES}"]
    return []


def teams_cost(text: str) -> int:
    """Bytes ``text`` adds to a card, as ``teams_card_bytes`` counts them: its
    JSON string (the escapes JSON needs, no others) in UTF-16 or UTF-8, whichever is larger."""
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]
    return max(
        len(escaped.encode("utf-16-le", "surrogatepass")),
        len(escaped.encode("utf-8", "surrogatepass")),
    )
