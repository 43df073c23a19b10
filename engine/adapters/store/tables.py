"""The schema, as SQLAlchemy Core tables. Alembic migrations create exactly this (a drift test
compares them). Times are stored as timezone-aware UTC; JSON as the dialect's JSON type."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every dialect. SQLite keeps naive text, so values are stored as
    naive UTC there (text order is time order) and made aware again on the way out.

    On SQLite the text is written and read by one function each way, in SQLAlchemy's own
    storage format (``YYYY-MM-DD HH:MM:SS.ffffff``) and with its parser
    (``datetime.fromisoformat``): the composed processors (this type's, then the dialect's
    ``DATETIME``, which formats through a dict) cost about twice as much, and a step binds
    and reads several timestamps (measured: 11 % of the engine's CPU during a burst of
    resumes)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Any:
        if dialect.name == "sqlite":
            return _sqlite_text
        return super().bind_processor(dialect)

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        if dialect.name == "sqlite":
            return _sqlite_datetime
        return super().result_processor(dialect, coltype)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        """PostgreSQL's (SQLite's is ``_sqlite_text``): the aware UTC time."""
        return None if value is None else _in_utc(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _in_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("naive datetime given to the store; use the injected clock")
    return value if value.tzinfo is UTC else value.astimezone(UTC)


# The last timestamp each way, as (value, converted): a commit binds one ``now`` for all its
# rows, and a journal read back gives many rows the same text (measured: of 26 timestamps
# bound per parked and resumed run, 18 were the one bound just before; of 20 read, 9). One
# tuple, swapped whole, so threads sharing it never see half of one.
_last_text: tuple[datetime | None, str | None] = (None, None)
_last_datetime: tuple[str | None, datetime | None] = (None, None)


def _sqlite_text(value: datetime | None) -> str | None:
    """An aware datetime as SQLite keeps it: naive UTC text with microseconds."""
    global _last_text
    if value is None:
        return None
    last = _last_text
    if value is last[0]:  # the cached object itself: held there, so never another's id
        return last[1]
    text = _in_utc(value).replace(tzinfo=None).isoformat(" ", "microseconds")
    _last_text = (value, text)
    return text


def _sqlite_datetime(value: str | None) -> datetime | None:
    global _last_datetime
    if value is None:
        return None
    last = _last_datetime
    if value == last[0]:
        return last[1]  # datetimes are immutable: sharing one is safe
    when = datetime.fromisoformat(value).replace(tzinfo=UTC)
    _last_datetime = (value, when)
    return when


def _serial() -> Column[int]:
    """A 64-bit autoincrement key (SQLite only autoincrements INTEGER PRIMARY KEY)."""
    return Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )


def _ts(name: str, nullable: bool = True) -> Column[datetime]:
    return Column(name, UTCDateTime(), nullable=nullable)


workflows = Table(
    "workflows",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("definition", JSON, nullable=False),
    Column("created_by", String(200)),
    _ts("created_at", False),
    _ts("updated_at", False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("workflow", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("input", JSON, nullable=False),
    Column("output", JSON),
    Column("error", Text),
    Column("requested_by", String(200)),
    Column("agent", String(200)),
    Column("parent_run_id", String(36), ForeignKey("runs.id")),
    Column("parent_step_id", String(200)),
    Column("idempotency_key", String(200), unique=True),
    Column("lease_owner", String(100)),
    _ts("lease_expires_at"),
    Column("next_seq", Integer, nullable=False, default=1),
    _ts("created_at", False),
    _ts("updated_at", False),
    Index("ix_runs_status_updated", "status", "updated_at"),
    Index("ix_runs_parent", "parent_run_id"),
)

journal = Table(
    "journal",
    metadata,
    Column("run_id", String(36), ForeignKey("runs.id"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("step_id", String(200)),
    Column("event", String(32), nullable=False),
    Column("data", JSON, nullable=False),
    _ts("at", False),
)

takeover_requests = Table(
    "takeover_requests",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("run_id", String(36), ForeignKey("runs.id"), nullable=False),
    Column("step_id", String(200)),
    Column("kind", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("reason", Text, nullable=False),
    Column("approvers", JSON, nullable=False),
    Column("approvals_required", Integer, nullable=False),
    Column("approvals", Integer, nullable=False, default=0),
    Column("allow_self_approval", Boolean, nullable=False),
    Column("timeout_behavior", String(16), nullable=False),
    Column("channels", JSON, nullable=False),
    Column("requested_by", String(200)),
    Column("details", JSON, nullable=False),
    Column("binding_hash", String(64)),
    Column("decided_by", String(200)),
    _ts("decided_at"),
    Column("notes", Text),
    Column("released_by", String(200)),
    _ts("released_at"),
    Column("sdp_offer", Text),
    Column("sdp_answer", Text),
    Column("deny_reason_required", Boolean, nullable=False, default=False),
    _ts("remind_at"),
    _ts("escalate_at"),
    Column("escalate_to", JSON, nullable=False),
    _ts("created_at", False),
    _ts("expires_at", False),
    Index("ix_takeover_status_expires", "status", "expires_at"),
    Index("ix_takeover_run", "run_id"),
    Index("ix_takeover_binding", "binding_hash"),
)

takeover_votes = Table(
    "takeover_votes",
    metadata,
    Column("request_id", String(36), ForeignKey("takeover_requests.id"), primary_key=True),
    Column("person", String(200), primary_key=True),
    Column("notes", Text),
    _ts("at", False),
)

outbox = Table(
    "outbox",
    metadata,
    _serial(),
    Column("dedupe_key", String(300), nullable=False, unique=True),
    Column("channel", String(300), nullable=False),  # "slack:C123", "teams:ops", "web", ...
    Column("kind", String(32), nullable=False),  # card, card_update, notice
    Column("run_id", String(36)),
    Column("request_id", String(36)),
    Column("payload", JSON, nullable=False),
    Column("status", String(16), nullable=False),  # pending, sent, failed
    Column("attempts", Integer, nullable=False, default=0),
    _ts("next_attempt_at", False),
    Column("claimed_by", String(100)),
    _ts("claimed_until"),
    Column("error", Text),
    _ts("created_at", False),
    _ts("sent_at"),
    Index("ix_outbox_status_next", "status", "next_attempt_at"),
)

chat_threads = Table(
    "chat_threads",
    metadata,
    Column("run_id", String(36), ForeignKey("runs.id"), primary_key=True),
    Column("channel", String(300), primary_key=True),
    Column("platform", String(16), nullable=False),
    Column("thread_ref", String(500), nullable=False),  # Slack root ts, Teams root activity id
    Column("data", JSON, nullable=False),
    _ts("created_at", False),
)

chat_messages = Table(
    "chat_messages",
    metadata,
    _serial(),
    Column("run_id", String(36), nullable=False),
    Column("request_id", String(36)),
    Column("channel", String(300), nullable=False),
    Column("platform", String(16), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("message_ref", String(500), nullable=False),  # Slack ts, Teams activity id
    Column("data", JSON, nullable=False),
    _ts("created_at", False),
    Index("ix_chat_messages_request", "request_id"),
    Index("ix_chat_messages_run", "run_id"),
)

chat_conversations = Table(
    "chat_conversations",
    metadata,
    Column("platform", String(16), primary_key=True),
    Column("conversation_id", String(500), primary_key=True),
    Column("name", String(200)),
    Column("reference", JSON, nullable=False),
    _ts("updated_at", False),
    UniqueConstraint("platform", "name", name="uq_chat_conversations_platform_name"),
)

# A person's own 1:1 chat with the bot, per platform, by their id there (a Teams AAD object
# id): where a card addressed to them (``teams:@alice``) goes. The conversation's reference is
# kept whole; ``conversation_id`` is there to be read, not joined.
chat_personal = Table(
    "chat_personal",
    metadata,
    Column("platform", String(16), primary_key=True),
    Column("user_id", String(200), primary_key=True),
    Column("conversation_id", String(500), nullable=False),
    Column("reference", JSON, nullable=False),
    _ts("updated_at", False),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("role", String(16), nullable=False),
    Column("person", String(200)),
    Column("token_hash", String(64), nullable=False, unique=True),
    _ts("created_at", False),
    _ts("revoked_at"),
    _ts("last_used_at"),
)

gate_overrides = Table(
    "gate_overrides",
    metadata,
    Column("scope", String(16), primary_key=True),  # global, agent, node_type
    Column("scope_key", String(200), primary_key=True),  # "" for global
    Column("setting", String(32), primary_key=True),
    Column("value", JSON, nullable=False),
    Column("updated_by", String(200), nullable=False),
    _ts("updated_at", False),
)

audit_log = Table(
    "audit_log",
    metadata,
    _serial(),
    _ts("at", False),
    Column("actor", String(200), nullable=False),
    Column("action", String(64), nullable=False),
    Column("target", String(300), nullable=False),
    Column("old", JSON),
    Column("new", JSON),
)

ledger = Table(
    "ledger",
    metadata,
    _serial(),
    Column("connector", String(200), nullable=False),
    Column("action", String(200), nullable=False),
    Column("args", JSON, nullable=False),
    Column("idempotency_key", String(300), nullable=False),
    Column("run_id", String(36)),
    Column("step_id", String(200)),
    _ts("at", False),
    Index("ix_ledger_key", "idempotency_key"),
)

link_uses = Table(
    "link_uses",
    metadata,
    # One row per (request, person): a signed approval link decides once (engine.links).
    Column("request_id", String(36), ForeignKey("takeover_requests.id"), primary_key=True),
    Column("person", String(200), primary_key=True),
    _ts("used_at", False),
    Column("action", String(16), nullable=False),  # grant, deny, takeover; release after takeover
)

seen_requests = Table(
    "seen_requests",
    metadata,
    # One row per signed chat request acted on: a replay of it acts zero times
    # (engine.services.replays). Rows past ``expires_at`` are swept.
    Column("key", String(300), primary_key=True),
    _ts("seen_at", False),
    _ts("expires_at", False),
    Index("ix_seen_requests_expires_at", "expires_at"),
)

# A person away, and who decides for them until then (engine.domain.delegation): one row per
# person, replaced when they set it again, deleted when it is ended. A row past ``until`` no
# longer routes anything; it stays until replaced or ended.
absences = Table(
    "absences",
    metadata,
    Column("person", String(200), primary_key=True),
    Column("delegate", String(200), nullable=False),
    _ts("until", False),
    Column("set_by", String(200), nullable=False),
    _ts("set_at", False),
)
