"""Alembic environment of the knowledge tables: online only, on the caller's connection."""

from __future__ import annotations

from alembic import context

VERSION_TABLE = "gcite_knowledge_alembic_version"

connection = context.config.attributes["connection"]
context.configure(connection=connection, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
