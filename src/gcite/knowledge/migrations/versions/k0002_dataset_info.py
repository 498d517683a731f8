"""A dataset's own fields (description, creation time, declared metadata fields).

Revision ID: k0002
Revises: k0001

``gcite_kb_datasets.info`` holds what a dataset's catalog entry keeps besides its id,
its list-valued metadata fields and its documents (the Knowledge API's ``description``,
``created_at``, ``updated_at``, ``metadata_fields``).
"""

from __future__ import annotations

from alembic import op

revision = "k0002"
down_revision = "k0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE gcite_kb_datasets ADD COLUMN info jsonb NOT NULL DEFAULT '{}'")


def downgrade() -> None:
    op.execute("ALTER TABLE gcite_kb_datasets DROP COLUMN info")
