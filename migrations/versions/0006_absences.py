"""People away and their delegates: who decides for whom until when.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05

A frozen snapshot like 0001: no import of engine.store.tables, names spelled out with ``op.f``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "absences",
        sa.Column("person", sa.String(length=200), nullable=False),
        sa.Column("delegate", sa.String(length=200), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("set_by", sa.String(length=200), nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("person", name=op.f("pk_absences")),
    )


def downgrade() -> None:
    op.drop_table("absences")
