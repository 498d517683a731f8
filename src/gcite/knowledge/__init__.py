"""The knowledge base: ingestion, hybrid retrieval on Qdrant Edge / Qdrant server, filters.

Public contract (docs/architecture.md)::

    # THE way to open the knowledge base (local or knowledge_url), in gcite.knowledge.access
    # (not re-exported here: it reaches the remote clients, which use this package)
    KnowledgeAccess(settings).store() -> KnowledgeStore
    KnowledgeAccess(settings).admin() -> KnowledgeAdmin
    open_store(settings) -> HybridStore   # the local store under it
    KnowledgeStore.search(query, *, dataset=None, roles=None, condition=None,
                          top_k=5, score_threshold=0.0) -> list[dict]   # Dify KR result items
    KnowledgeStore.datasets() -> list[str];  KnowledgeStore.close()
    ingest_paths(paths, *, settings, dataset, manifest=None, progress=False) -> IngestReport

``KnowledgeStore``, ``KnowledgeAdmin`` and ``role_condition`` are light; the store and
ingestion (embedders, Qdrant, document converters) load on first use of their names.
See docs/knowledge-base.md for formats, metadata, filter syntax and configuration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gcite.knowledge.admin import KnowledgeAdmin
from gcite.knowledge.filters import role_condition
from gcite.knowledge.protocol import KnowledgeStore

if TYPE_CHECKING:
    from gcite.knowledge.ingest import IngestReport, ingest_paths
    from gcite.knowledge.store import HybridStore, open_store

_LAZY = {
    "HybridStore": "gcite.knowledge.store",
    "open_store": "gcite.knowledge.store",
    "IngestReport": "gcite.knowledge.ingest",
    "ingest_paths": "gcite.knowledge.ingest",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gcite.knowledge' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "HybridStore",
    "IngestReport",
    "KnowledgeAdmin",
    "KnowledgeStore",
    "ingest_paths",
    "open_store",
    "role_condition",
]
