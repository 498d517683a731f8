"""The conversation store as it was before migrations (conversations and messages).

Revision ID: 0001
Revises: -
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gcite_conversations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
    )
    op.create_index("ix_gcite_conversations_user", "gcite_conversations", ["user"])
    op.create_index("ix_gcite_conversations_updated_at", "gcite_conversations", ["updated_at"])
    op.create_table(
        "gcite_messages",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("conversation_id", sa.String(36), nullable=False),
        sa.Column("user", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("failed", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("chunk_metadata", sa.JSON(), nullable=False),
        sa.Column("retriever_resources", sa.JSON(), nullable=False),
        sa.Column("cited_ids", sa.JSON(), nullable=False),
        sa.Column("message_metadata", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_gcite_messages_conversation_id", "gcite_messages", ["conversation_id"])


def downgrade() -> None:
    op.drop_table("gcite_messages")
    op.drop_table("gcite_conversations")
