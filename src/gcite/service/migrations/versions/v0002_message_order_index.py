"""Messages of a conversation in order: an index on (conversation_id, seq).

History, paging and Plan B by conversation all read ``WHERE conversation_id = ? ORDER BY
seq``; the index serves them without a sort.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_gcite_messages_conversation_seq", "gcite_messages", ["conversation_id", "seq"]
    )


def downgrade() -> None:
    op.drop_index("ix_gcite_messages_conversation_seq", table_name="gcite_messages")
