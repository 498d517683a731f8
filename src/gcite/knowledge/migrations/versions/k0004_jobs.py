"""Indexing jobs, shared by every process of a pgvector knowledge base.

Revision ID: k0004
Revises: k0003

``gcite_kb_jobs`` holds one row per indexing run of the Knowledge API (a Dify ``batch``,
:mod:`gcite.knowledge.stores.pgjobs`): its state (``status``, the times, the failure), the
document as it will be (``document``, ``roles_change``: jsonb), and the process that runs
it (``owner_host``, ``owner_pid``, ``owner_started``; ``seen_at``: its last heartbeat,
Unix seconds), so that a status poll on any process reads it and a run whose process died
reads as failed. ``seq`` orders the rows for pruning.
"""

from __future__ import annotations

from alembic import op

revision = "k0004"
down_revision = "k0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE gcite_kb_jobs (
            batch text PRIMARY KEY,
            seq bigserial NOT NULL,
            status text NOT NULL,
            document jsonb NOT NULL,
            roles_change jsonb,
            created_at double precision NOT NULL DEFAULT 0,
            started_at double precision NOT NULL DEFAULT 0,
            completed_at double precision NOT NULL DEFAULT 0,
            error text,
            error_status integer NOT NULL DEFAULT 0,
            error_code text NOT NULL DEFAULT '',
            owner_host text NOT NULL,
            owner_pid integer NOT NULL,
            owner_started bigint NOT NULL,
            seen_at bigint NOT NULL
        )
        """
    )
    op.execute("CREATE INDEX ix_gcite_kb_jobs_seq ON gcite_kb_jobs (seq)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS gcite_kb_jobs")
