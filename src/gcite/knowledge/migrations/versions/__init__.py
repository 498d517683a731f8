"""The knowledge tables' Alembic revisions, append-only."""
