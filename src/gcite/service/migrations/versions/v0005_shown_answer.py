"""The answer as the client saw it: ``gcite_messages.shown_answer`` beside the raw ``answer``.

An app key with ``citation_style = "numbers"`` receives its answers with the ``[C:N]``
markers rendered as display numbers; the raw answer (markers kept) still feeds the
conversation history. Null: the client saw the raw answer (every message before this
revision, and every ``markers`` key).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("gcite_messages", sa.Column("shown_answer", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gcite_messages") as batch:
        batch.drop_column("shown_answer")
