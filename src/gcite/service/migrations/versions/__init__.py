"""Alembic revisions of the conversation store, append-only (one module per revision)."""
