"""Web pages: the uses of signed approval links (single-use decisions).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

A frozen snapshot like 0001: no import of engine.store.tables, names spelled out with ``op.f``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "link_uses",
        sa.Column("request_id", sa.String(length=36), nullable=False),
        sa.Column("person", sa.String(length=200), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("request_id", "person", name=op.f("pk_link_uses")),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["takeover_requests.id"],
            name=op.f("fk_link_uses_request_id_takeover_requests"),
        ),
    )


def downgrade() -> None:
    op.drop_table("link_uses")
