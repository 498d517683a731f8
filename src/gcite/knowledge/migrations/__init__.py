"""Alembic migrations of the PostgreSQL knowledge tables (``store = "pgvector"``).

Their own version table (``gcite_knowledge_alembic_version``), so the knowledge tables and
the conversation tables (:mod:`gcite.service.migrations`) evolve independently, in one
database or two. Run by :func:`gcite.knowledge.stores.pgvector.migrate`.
"""
