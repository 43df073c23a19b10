"""What a signed approval link leaves behind: its single use (``engine.services.links``).

A decision through a link is recorded as a ``LinkUse`` in the decision's own transaction, keyed
by (request, person): a second decision through the same link raises
``engine.domain.errors.LinkUsed``. The record is the domain's so that the decision's one path
(``engine.services.approvals``) and the store that keeps it both read it from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class LinkUse:
    """A decision made through a signed link (``action`` is the link verb: grant, deny,
    takeover, or release after a takeover through the same link)."""

    request_id: str
    person: str
    action: str
    used_at: datetime
