"""What both vector-index adapters share: point and hit types, the hybrid query plan, the seam.

A :class:`VectorIndex` is one Qdrant collection (or Qdrant Edge shard) holding a dense
vector (``dense``, cosine) and a sparse BM25 vector (``bm25``, IDF modifier) per chunk.
:class:`gcite.knowledge.store.HybridStore` does everything above it (catalog, embedder,
filters, ranking); the adapters only translate a :class:`HybridQuery` and the point
operations into their API and map their SDK's errors to :class:`~gcite.errors.StoreError`
at one boundary each:

* :class:`gcite.knowledge.stores.edge.EdgeIndex` - in-process Qdrant Edge shard;
* :class:`gcite.knowledge.stores.qdrant.QdrantIndex` - ``qdrant-client`` (server URL,
  ``local:<dir>`` or ``:memory:``).

The hybrid query is built once, here (:func:`hybrid_query`): one prefetch per retriever
(dense, sparse), fused by RRF (k=60), the payload filter inside every stage and on the
fusion. Source: Qdrant "hybrid queries" docs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gcite.knowledge.filters import FilterModels
from gcite.knowledge.sparse import Sparse

COLLECTION = "gcite"
DENSE = "dense"
SPARSE = "bm25"
RRF_K = 60
INDEXED_KEYWORDS = ("dataset_name", "document_id", "m_str.access_roles")


@dataclass
class PointData:
    """One chunk to store: id (UUID string), dense vector, sparse vector, payload."""

    id: str
    dense: list[float]
    sparse: Sparse
    payload: dict[str, Any]


@dataclass
class Hit:
    """One raw search hit: fused RRF score scaled to 0-1 (see :func:`rrf_scale`), payload;
    ``id``: the point id when known (a hit scored from candidates)."""

    score: float
    payload: dict[str, Any]
    id: str = ""


@dataclass
class Candidate:
    """One point of a single-retriever query, with what the relevance score needs.

    ``id``: point id; ``score``: the retriever's raw score (cosine, or BM25 with IDF);
    ``tokens``: the token ids of the stored BM25 vector (any collection: a list as the
    binding returns it, a set; only tested for membership); ``payload``: the full payload;
    ``cosine``: the query's cosine with the stored dense vector (set for a hit of the dense
    retriever, whose score is that cosine, and by :func:`gcite.knowledge.store.with_cosines`
    for the others; ``None``: scored on its words alone).
    """

    id: str
    score: float
    tokens: Collection[int]
    payload: dict[str, Any]
    cosine: float | None = None


@dataclass(frozen=True)
class Stage:
    """One prefetch of the hybrid query: ``using`` (``dense`` | ``bm25``) and its vector.

    ``weights``: token id -> general IDF weight of each query token
    (:func:`~gcite.knowledge.sparse.query_weights`), for an index that ranks keyword
    matches without corpus statistics (pgvector); the Qdrant stores apply their own IDF.
    ``dense`` on a ``bm25`` stage: the query embedding, for an index that computes the
    keyword candidates' cosines in the same query (:meth:`VectorIndex.retrieve`).
    """

    using: str
    dense: list[float] | None = None
    sparse: Sparse | None = None
    weights: Mapping[int, float] | None = None


@dataclass(frozen=True)
class HybridQuery:
    """The whole hybrid query, independent of the Qdrant API that runs it.

    ``stages``: 1-2 prefetches, each ``prefetch`` candidates under ``flt``; fused by RRF
    with ``k = RRF_K``; ``limit`` results; ``threshold``: minimum raw RRF score or None.
    """

    stages: tuple[Stage, ...]
    flt: Any
    limit: int
    prefetch: int
    threshold: float | None


def hybrid_query(
    dense: list[float] | None,
    sparse: Sparse | None,
    flt: Any,
    *,
    limit: int,
    prefetch: int,
    threshold: float | None,
) -> HybridQuery | None:
    """The query plan for the given vectors; ``None`` when there is nothing to search with
    (no dense vector and a sparse vector without tokens)."""
    stages: list[Stage] = []
    if dense is not None:
        stages.append(Stage(DENSE, dense=dense))
    if sparse is not None and sparse.indices:
        stages.append(Stage(SPARSE, sparse=sparse))
    if not stages:
        return None
    return HybridQuery(tuple(stages), flt, limit, prefetch, threshold)


def nearest_each(
    index: VectorIndex, stages: Sequence[Stage], flt: Any, limit: int
) -> list[list[Candidate]]:
    """:meth:`VectorIndex.retrieve` of an index that runs one query per stage."""
    return [index.nearest(stage, flt, limit, with_payload=False) for stage in stages]


def rrf_scale(score: float, stages: int) -> float:
    """RRF score (sum of 1/(k+rank), rank from 0) -> 0-1 (1.0 = first in every stage)."""
    return min(1.0, max(0.0, float(score) * RRF_K / max(stages, 1)))


class VectorIndex(Protocol):
    """The Qdrant operations a :class:`~gcite.knowledge.store.HybridStore` needs.

    Every method raises :class:`~gcite.errors.StoreError` (and nothing else) on failure.
    Lifecycle: :meth:`ensure` creates the collection when missing (ingestion),
    :meth:`flush` persists, :meth:`close` releases (idempotent).
    """

    models: FilterModels
    transactional: bool
    """True when writes stay invisible to every reader until the catalog save commits them
    (pgvector); False when every write is visible at once (the Qdrant adapters: a new
    version is then hidden by the store's filter until it is swapped in)."""

    def ensure(self, dim: int) -> None: ...
    def upsert(self, points: Sequence[PointData]) -> None: ...
    def delete_document(self, document_id: str) -> None: ...
    def delete_matching(self, flt: Any) -> None:
        """Remove every point that ``flt`` (a filter of :attr:`models`) matches."""
        ...

    def query(self, query: HybridQuery) -> list[Hit]: ...
    def nearest(
        self, stage: Stage, flt: Any, limit: int, *, with_payload: bool = True
    ) -> list[Candidate]:
        """One retriever alone: the ``limit`` best points under ``flt``, with the token ids
        of their BM25 vectors (and their payloads, unless ``with_payload`` is false: then
        ``{}``). A dense stage's candidates carry their ``cosine`` (the score); a BM25
        stage's carry neither ``cosine`` nor ``dense`` (see :meth:`cosines`)."""
        ...

    def retrieve(self, stages: Sequence[Stage], flt: Any, limit: int) -> list[list[Candidate]]:
        """Every stage's candidates, in stage order: :meth:`nearest` of each without
        payloads (:func:`nearest_each`), or all from one query where the index can (one
        round trip). A keyword stage that carries the query embedding (``dense``) may get
        its candidates' ``cosine`` set from it (pgvector: in the same query); the others
        are left to :meth:`cosines`."""
        ...

    def cosines(self, dense: list[float], ids: Sequence[str]) -> dict[str, float]:
        """The cosine of the query embedding ``dense`` with the stored dense vector of each
        point in ``ids`` (point id -> cosine; unknown ids left out), computed by the store:
        no vector is sent back."""
        ...

    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The payloads of the points ``ids`` (point id -> payload; missing ids left out)."""
        ...

    def count(self) -> int: ...
    def count_matching(self, flt: Any) -> int: ...
    def flush(self) -> None: ...
    def rollback(self) -> None:
        """Discard the writes since the last save where the index keeps them in a
        transaction (pgvector); the Qdrant adapters write through and do nothing."""
        ...

    def optimize(self) -> None:
        """Build (or bring up to date) the dense vector index after writes, where the
        index does not keep it up to date itself (Qdrant Edge); others do nothing."""
        ...

    def close(self) -> None: ...


__all__ = [
    "COLLECTION",
    "DENSE",
    "INDEXED_KEYWORDS",
    "RRF_K",
    "SPARSE",
    "Candidate",
    "Hit",
    "HybridQuery",
    "PointData",
    "Stage",
    "VectorIndex",
    "hybrid_query",
    "nearest_each",
    "rrf_scale",
]
