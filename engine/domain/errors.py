"""Every error Signoff raises on purpose, in one tree.

    SignoffError
    ├── ConfigError                 bad app.yaml / workflow definition (carries problems: list[str])
    ├── NotFound                    a run, request, workflow, token ... does not exist
    ├── Unauthorized                no or bad credentials
    ├── Forbidden                   authenticated, but not allowed (not an approver, self-approval)
    ├── InvalidRequest              a request body or argument is wrong
    │   ├── Unprocessable           well-formed, but a rule refuses it (422 from the API)
    │   └── CommandUsageError       a chat gate command that does not fit the grammar
    ├── Conflict                    the state does not allow it
    │   ├── TransitionRefused       a conditional UPDATE changed zero rows
    │   │   └── AlreadyDecided      a takeover request was decided by someone else first
    │   ├── DuplicateVote           the same person granted twice toward a quorum
    │   │   └── SeatTaken           ... or someone away and their delegate, once each
    │   ├── LinkUsed                a signed approval link already decided its request
    │   └── AlreadyAppended         a journal append found its events there already (a commit
    │                               that landed unseen); the store answers with their seq
    ├── Gone                        expired link or call
    ├── NondeterminismError         the journal and the graph disagree on replay
    ├── StepError                   a step failed (connector, tool, LLM); retried or fails the run
    │   ├── ConnectorError
    │   └── ExpressionLimit         a workflow expression went past a limit; never retried
    ├── DeliveryError               an outbox message was not delivered (``retry_after``,
    │                               ``permanent``); raised by sinks, retried by the dispatcher
    └── StoreError                  the database could not be reached or answered wrongly

The REST API maps each type to one HTTP status and one ``error`` code in ``bot/api/errors.py``.
Driver errors are translated at the store adapter (``raise StoreError(...) from exc``).
"""

from __future__ import annotations

from typing import Any

from engine.domain.records import LinkUse


class SignoffError(Exception):
    """The root of every error Signoff raises on purpose."""

    code = "error"

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields


class ConfigError(SignoffError):
    """A configuration or workflow definition is invalid; ``problems`` holds one line each,
    every line starting with the YAML path of the bad key."""

    code = "invalid_config"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems) if problems else "invalid configuration")
        self.problems = problems


class NotFound(SignoffError):
    code = "not_found"


class Unauthorized(SignoffError):
    code = "unauthorized"


class Forbidden(SignoffError):
    code = "forbidden"


class InvalidRequest(SignoffError):
    code = "invalid_request"


class Conflict(SignoffError):
    code = "conflict"


class TransitionRefused(Conflict):
    """A status transition matched zero rows: the row is not in an allowed source status."""

    code = "invalid_transition"

    def __init__(self, message: str, *, current: str | None = None, **fields: Any) -> None:
        super().__init__(message, status=current, **fields)
        self.current = current


class AlreadyDecided(TransitionRefused):
    """Someone else decided this takeover request first (or it expired)."""

    code = "already_decided"

    def __init__(
        self, message: str, *, current: str | None = None, decided_by: str | None = None
    ) -> None:
        super().__init__(message, current=current, decided_by=decided_by)
        self.decided_by = decided_by


class DuplicateVote(Conflict):
    code = "duplicate_vote"


class SeatTaken(DuplicateVote):
    """The vote of someone away and their delegate's are one (``engine.domain.delegation``):
    the other one has already cast it; the message says who."""


class Unprocessable(InvalidRequest):
    """Well-formed (its JSON Schema holds) but refused by a rule no schema says: a time past
    or too far ahead, a person unknown. The API answers 422, as for a stored workflow."""


class CommandUsageError(InvalidRequest):
    """The text is not a valid gate command (``engine.gate.commands``); ``message`` says why,
    with the usage line."""


class LinkUsed(Conflict):
    """The link already decided its request (``engine.services.links``); ``use`` says how and
    when (None when its row is gone)."""

    code = "link_used"

    def __init__(self, request_id: str, use: LinkUse | None) -> None:
        super().__init__("this link has already been used", request_id=request_id)
        self.use = use


class AlreadyAppended(Conflict):
    """An append found its events already in the journal from ``first`` on (see
    ``engine.adapters.store.base.append_journal``'s ``expect``): an earlier attempt committed
    though its caller was told it failed. Caught by the store, never seen above it."""

    code = "already_appended"

    def __init__(self, first: int) -> None:
        super().__init__(f"the events were appended from seq {first} already", first=first)
        self.first = first


class Gone(SignoffError):
    code = "gone"


class NondeterminismError(SignoffError):
    """The journal records a step that the current graph does not have at that point."""

    code = "nondeterminism"


class StepError(SignoffError):
    """A step failed. ``retryable`` says whether running it again may help."""

    code = "step_failed"

    def __init__(self, message: str, *, retryable: bool = False, **fields: Any) -> None:
        super().__init__(message, **fields)
        self.retryable = retryable


class ConnectorError(StepError):
    code = "connector_failed"


class ExpressionLimit(StepError):
    """A workflow expression went past one of ``engine/domain/expression_limits.py``'s limits; the
    message starts ``expression limit: `` and says which. Running it again cannot help."""


class DeliveryError(SignoffError):
    """A sink could not deliver an outbox message (``engine.services.delivery``):
    ``retry_after`` seconds the remote asked to wait, ``permanent`` when no retry can help."""

    code = "delivery_failed"

    def __init__(
        self, message: str, *, retry_after: float | None = None, permanent: bool = False
    ) -> None:
        super().__init__(message, retry_after=retry_after, permanent=permanent)
        self.retry_after = retry_after
        self.permanent = permanent


class StoreError(SignoffError):
    code = "store_unavailable"
