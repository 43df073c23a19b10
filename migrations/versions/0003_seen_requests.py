"""Signed chat requests already acted on: a replay of one acts zero times.

Revision ID: 0003
Revises: 0002
Create Date: 2027-01-15

A frozen snapshot like 0001: no import of engine.store.tables, names spelled out with ``op.f``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "seen_requests",
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_seen_requests")),
    )
    op.create_index("ix_seen_requests_expires_at", "seen_requests", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_seen_requests_expires_at", table_name="seen_requests")
    op.drop_table("seen_requests")
