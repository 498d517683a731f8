"""The vector-index adapters behind :class:`gcite.knowledge.store.HybridStore`.

``base`` (the :class:`VectorIndex` seam, points, hits, the hybrid query plan), ``edge``
(Qdrant Edge, in process) and ``qdrant`` (qdrant-client: server or local mode). Each
adapter imports its SDK only when constructed.
"""

from __future__ import annotations

from gcite.knowledge.stores.base import Hit, HybridQuery, PointData, VectorIndex, hybrid_query

__all__ = ["Hit", "HybridQuery", "PointData", "VectorIndex", "hybrid_query"]
