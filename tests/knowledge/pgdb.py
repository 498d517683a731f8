"""Fresh databases on the session's pgvector server (``pgvector_url``), one per test module."""

from __future__ import annotations

import secrets


def fresh_database(url: str, prefix: str = "kb") -> str:
    """Create an empty database on the server of ``url``; return its URL."""
    import psycopg

    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name
