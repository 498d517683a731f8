"""Knowledge tags (Dify's dataset tags).

Revision ID: k0003
Revises: k0002

``gcite_kb_tags`` holds the tags (id, unique name, creation time); which datasets a tag
is bound to is kept in the dataset's ``info`` (``tag_ids``, see k0002), so a dataset and
its bindings change in one row.
"""

from __future__ import annotations

from alembic import op

revision = "k0003"
down_revision = "k0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE gcite_kb_tags (
            id text PRIMARY KEY,
            name text NOT NULL UNIQUE,
            created_at bigint NOT NULL DEFAULT 0
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS gcite_kb_tags")
