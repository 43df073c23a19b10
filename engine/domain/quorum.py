"""When grants decide a request: its quorum, or an admin override.

A request needs ``approvals_required`` grants from different people. Each grant is counted;
the one that completes the quorum decides it (``granted``, and with a release ``released``).
An admin deciding outside the approvers (``engine.domain.approvers.override_of``) decides it
at once, whatever the count.

``quorum_met`` compares with operators only: the SQL store's grant, one UPDATE that counts
the vote and decides in the same statement, applies this same function to its columns.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

R = TypeVar("R", covariant=True)


class Count(Protocol[R]):
    """A number of grants, or the store's expression for one."""

    def __ge__(self, other: Any, /) -> R: ...


def quorum_met(approvals: Count[R], required: object) -> R:
    """Whether ``approvals`` grants meet a quorum of ``required``."""
    return approvals >= required


def grant_decides(approvals: int, required: int, override: bool) -> bool:
    """Whether a grant leaving ``approvals`` counted decides the request: the quorum is met,
    or an admin override decides it."""
    return quorum_met(approvals, required) or override


def toward_quorum(approvals: int, override: bool) -> int:
    """The grants counted toward the quorum of a request granted with ``approvals`` votes:
    an overriding admin's own grant is no approver's ("1 of 2, decided by alice's admin
    override", not a full "2 of 2")."""
    return approvals - 1 if override else approvals


def forced_by_override(approvals: int, required: int, override: bool) -> bool:
    """Whether an override decides a request its quorum has not (the count alone would leave
    it pending)."""
    return override and not quorum_met(approvals, required)
