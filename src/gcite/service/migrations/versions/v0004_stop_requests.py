"""Stop requests (``POST /v1/chat-messages/{task_id}/stop``) for runs on another worker.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gcite_stop_requests",
        sa.Column("task_id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(512), primary_key=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("gcite_stop_requests")
