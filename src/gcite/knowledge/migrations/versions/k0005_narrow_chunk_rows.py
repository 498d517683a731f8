"""Narrow chunk rows: the vector, the token ids, the lexemes and the payload out of line.

Revision ID: k0005
Revises: k0004

The keyword retriever reads up to ``POSTINGS_PER_TOKEN`` rows of ``gcite_kb_chunks`` per
query token (a bitmap heap scan: a row's ``id`` and ``n_tokens``), and the dense retriever
walks the HNSW index, which holds its own copy of the vectors. With the vector (and the
lexemes) inline, a row took most of a page: every keyword search touched thousands of
pages, and the heap and the HNSW index together outgrew PostgreSQL's buffer cache at 100x
the law corpus, so the two retrievers evicted each other's pages. Stored out of line (the
TOAST table, uncompressed: floats and token ids do not compress) with a 128-byte tuple
target, a row keeps its scalar columns and pointers only, and the values are read only
for the candidates a search returns (measurements: docs/knowledge-base.md,
"PostgreSQL + pgvector").

Rows written before this revision keep their layout until rewritten (an update, a new
ingest of their document, or ``VACUUM FULL gcite_kb_chunks`` in a maintenance window).
"""

from __future__ import annotations

from alembic import op

revision = "k0005"
down_revision = "k0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE gcite_kb_chunks ALTER COLUMN embedding SET STORAGE EXTERNAL, "
        "ALTER COLUMN lexemes SET STORAGE EXTERNAL, ALTER COLUMN tokens SET STORAGE EXTERNAL, "
        "SET (toast_tuple_target = 128)"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE gcite_kb_chunks ALTER COLUMN embedding SET STORAGE MAIN, "
        "ALTER COLUMN lexemes SET STORAGE MAIN, ALTER COLUMN tokens SET STORAGE EXTENDED, "
        "RESET (toast_tuple_target)"
    )
