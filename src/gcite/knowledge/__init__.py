"""The knowledge base: ingestion, hybrid retrieval on Qdrant Edge / Qdrant server, filters.

Public contract (docs/architecture.md)::

    open_store(settings) -> HybridStore   # a KnowledgeStore (gcite.knowledge.protocol)
    KnowledgeStore.search(query, *, dataset=None, roles=None, condition=None,
                          top_k=5, score_threshold=0.0) -> list[dict]   # Dify KR result items
    KnowledgeStore.datasets() -> list[str];  KnowledgeStore.close()
    ingest_paths(paths, *, settings, dataset, manifest=None, progress=False) -> IngestReport

See docs/knowledge-base.md for formats, metadata, filter syntax and configuration.
"""

from __future__ import annotations

from gcite.knowledge.filters import role_condition
from gcite.knowledge.ingest import IngestReport, ingest_paths
from gcite.knowledge.protocol import KnowledgeStore
from gcite.knowledge.store import HybridStore, open_store

__all__ = [
    "HybridStore",
    "IngestReport",
    "KnowledgeStore",
    "ingest_paths",
    "open_store",
    "role_condition",
]
