"""People's personal chats with the bot: where a card addressed to a person goes.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-05

A frozen snapshot like 0001: no import of engine.store.tables, names spelled out with ``op.f``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "chat_personal",
        sa.Column("platform", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("conversation_id", sa.String(length=500), nullable=False),
        sa.Column("reference", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("platform", "user_id", name=op.f("pk_chat_personal")),
    )


def downgrade() -> None:
    op.drop_table("chat_personal")
