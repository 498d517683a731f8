"""Server processes sharing the database, and which one runs each message.

``gcite_instances``: one row per live server process (host, pid, process start, last
heartbeat); ``gcite_messages.instance_id``: the process that runs a message, with a
partial index over the messages still ``running`` (the only ones looked up by it).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

RUNNING = sa.text("status = 'running'")


def upgrade() -> None:
    op.create_table(
        "gcite_instances",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started", sa.BigInteger(), nullable=False),
        sa.Column("seen_at", sa.BigInteger(), nullable=False),
    )
    with op.batch_alter_table("gcite_messages") as batch:
        batch.add_column(sa.Column("instance_id", sa.String(36), nullable=True))
    op.create_index(
        "ix_gcite_messages_running",
        "gcite_messages",
        ["instance_id"],
        postgresql_where=RUNNING,
        sqlite_where=RUNNING,
    )


def downgrade() -> None:
    op.drop_index("ix_gcite_messages_running", table_name="gcite_messages")
    with op.batch_alter_table("gcite_messages") as batch:
        batch.drop_column("instance_id")
    op.drop_table("gcite_instances")
