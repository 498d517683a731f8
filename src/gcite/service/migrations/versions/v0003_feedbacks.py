"""End users' feedback on answers (``POST /v1/messages/{id}/feedbacks``), one row per message.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gcite_feedbacks",
        sa.Column("message_id", sa.String(36), primary_key=True),
        sa.Column("rating", sa.String(16), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("gcite_feedbacks")
