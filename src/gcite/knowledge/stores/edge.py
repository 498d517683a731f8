"""The Qdrant Edge adapter: an in-process shard (``qdrant-edge-py``), no server.

A shard lives in ``<data_dir>/qdrant`` and can be open in one process at a time
(:class:`gcite.knowledge.store.HybridStore` shares one handle per directory inside a
process). The binding raises plain ``Exception``; :func:`edge_errors` is the one place
those become :class:`~gcite.errors.StoreError` (a held lock gets its own message, since
it is the usual mistake: two processes on one data dir).
Source: Qdrant Edge docs.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gcite.errors import StoreError
from gcite.knowledge.filters import FilterModels
from gcite.knowledge.stores.base import (
    DENSE,
    INDEXED_KEYWORDS,
    RRF_K,
    SPARSE,
    Candidate,
    Hit,
    HybridQuery,
    PointData,
    Stage,
    nearest_each,
    rrf_scale,
)

SEARCH_THREADS = 1
"""Threads of a shard's search pool (``max_search_threads``). The binding holds the GIL
while a query runs, so concurrent searches of one process run one at a time whatever the
pool; the pool only parallelises the segments of one query, and a gcite shard of a few
thousand chunks is one or two segments. On the law corpus the CPU-derived default spent
more CPU per query (pool wake-ups) and more wall time than one thread, with the same
results (docs/benchmarks.md, "Knowledge process per request")."""

CONFIG_FILE = "edge_config.json"

INDEXING_THRESHOLD_KB: int | None = None
"""Vector data (KB) above which a segment gets its HNSW index when the shard is optimized
(:meth:`EdgeIndex.optimize`, after every ingest); ``None``: Qdrant's default (10,000 KB,
about 5,000 chunks of 512 dimensions). A smaller segment is searched by a scan, which is
the faster plan there. Only read when a shard is created."""


def map_edge_error(exc: Exception, path: Path, action: str) -> StoreError:
    """The :class:`StoreError` for an exception of the binding during ``action``
    (``open`` | ``query`` | ``write``) on the shard in ``path``."""
    text = str(exc)
    if "WouldBlock" in text or "lock" in text.lower():
        return StoreError(
            f"知识库 {path} 正被另一个进程使用（Qdrant Edge 同一时间只允许一个进程打开），"
            "请先停止该进程，或配置 qdrant_url 使用 Qdrant 服务器"
        )
    if action == "open":
        return StoreError(f"知识库数据损坏，无法打开 {path}: {text}")
    if action == "write":
        return StoreError(f"知识库写入失败: {text}")
    return StoreError(f"知识库查询失败: {text}")


@contextlib.contextmanager
def edge_errors(path: Path, action: str) -> Iterator[None]:
    """Run a block of binding calls; any exception but StoreError -> :func:`map_edge_error`."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:  # the binding raises plain Exception
        raise map_edge_error(exc, path, action) from exc


class EdgeModels:
    """:class:`~gcite.knowledge.filters.FilterModels` for ``qdrant_edge``."""

    def __init__(self) -> None:
        import qdrant_edge

        self.q = qdrant_edge

    def match_value(self, key: str, value: str) -> Any:
        return self.q.FieldCondition(key, match=self.q.MatchValue(value))

    def match_any(self, key: str, values: list[str]) -> Any:
        return self.q.FieldCondition(key, match=self.q.MatchAny(values))

    def substring(self, key: str, value: str) -> Any:
        return self.q.FieldCondition(key, match=self.q.MatchSubstring(value))

    def prefix(self, key: str, value: str) -> Any:
        return self.q.FieldCondition(key, match=self.q.MatchPrefix(value))

    def range(
        self,
        key: str,
        *,
        gt: float | None = None,
        gte: float | None = None,
        lt: float | None = None,
        lte: float | None = None,
    ) -> Any:
        return self.q.FieldCondition(key, range=self.q.RangeFloat(gt=gt, gte=gte, lt=lt, lte=lte))

    def is_empty(self, key: str) -> Any:
        return self.q.IsEmptyCondition(key)

    def filter(
        self,
        must: list[Any] | None = None,
        should: list[Any] | None = None,
        must_not: list[Any] | None = None,
    ) -> Any:
        return self.q.Filter(must=must, should=should, must_not=must_not)


class EdgeIndex:
    """A :class:`~gcite.knowledge.stores.base.VectorIndex` on the Qdrant Edge shard in ``path``.

    An existing shard is loaded; otherwise ``create=True`` lets :meth:`ensure` create it and
    ``create=False`` raises :class:`StoreError` (the knowledge base is damaged).

    New shards keep their payloads on disk (``Memory.Cold``; search reads the few payloads
    it returns through the page cache), vectors and the sparse index in memory (Qdrant
    Edge's defaults). ``Memory.Cached`` kept a RAM copy of the payload storage: a
    33 MiB file-backed block from the first write on, growing with the stored
    text. A shard created before keeps its placement until it is rebuilt.
    """

    def __init__(self, path: Path, *, create: bool) -> None:
        import qdrant_edge as q

        self.q = q
        self.models: FilterModels = EdgeModels()
        self.transactional = False
        self.path = path
        self.shard: Any = None
        if path.is_dir() and any(path.iterdir()):
            config = search_config(q, path)
            if config is not None:
                with contextlib.suppress(Exception):  # e.g. read-only: load it as stored
                    self.shard = q.EdgeShard.load(str(path), config)
            if self.shard is None:
                with edge_errors(path, "open"):
                    self.shard = q.EdgeShard.load(str(path))
        elif not create:
            raise StoreError(f"知识库数据损坏: 缺少向量库目录 {path}，请重新运行 gcite ingest")

    def ensure(self, dim: int) -> None:
        if self.shard is not None:
            return
        q = self.q
        with edge_errors(self.path, "open"):
            config = q.EdgeConfig(
                vectors={DENSE: q.EdgeVectorParams(size=dim, distance=q.Distance.Cosine)},
                sparse_vectors={SPARSE: q.EdgeSparseVectorParams(modifier=q.Modifier.Idf)},
                # payloads on disk, read through the page cache (not a RAM copy of every
                # chunk's text): ingest memory then does not grow with the payload
                payload_memory=q.Memory.Cold,
                max_search_threads=SEARCH_THREADS,
                optimizers=(
                    None
                    if INDEXING_THRESHOLD_KB is None
                    else q.EdgeOptimizersConfig(indexing_threshold=INDEXING_THRESHOLD_KB)
                ),
            )
            self.shard = q.EdgeShard.create(str(self.path), config)
            for key in INDEXED_KEYWORDS:
                self.shard.update(
                    q.UpdateOperation.create_field_index(key, q.PayloadSchemaType.Keyword)
                )

    def _shard(self) -> Any:
        if self.shard is None:
            raise StoreError("知识库为空: 尚未导入任何文档")
        return self.shard

    def upsert(self, points: Sequence[PointData]) -> None:
        q = self.q
        if not points:
            return
        shard = self._shard()
        with edge_errors(self.path, "write"):
            items = [
                q.Point(
                    p.id,
                    {DENSE: p.dense, SPARSE: q.SparseVector(p.sparse.indices, p.sparse.values)},
                    p.payload,
                )
                for p in points
            ]
            shard.update(q.UpdateOperation.upsert_points(items))

    def delete_document(self, document_id: str) -> None:
        if self.shard is None:
            return
        with edge_errors(self.path, "write"):
            flt = self.q.Filter(must=[self.models.match_value("document_id", document_id)])
            self.shard.update(self.q.UpdateOperation.delete_points_by_filter(flt))

    def delete_matching(self, flt: Any) -> None:
        if self.shard is None:
            return
        with edge_errors(self.path, "write"):
            self.shard.update(self.q.UpdateOperation.delete_points_by_filter(flt))

    def query(self, query: HybridQuery) -> list[Hit]:
        q = self.q
        shard = self._shard()
        with edge_errors(self.path, "query"):
            prefetches = []
            for stage in query.stages:
                vector: Any = stage.dense
                if stage.sparse is not None:
                    vector = q.SparseVector(stage.sparse.indices, stage.sparse.values)
                prefetches.append(
                    q.Prefetch(
                        limit=query.prefetch,
                        query=q.Query.Nearest(vector, using=stage.using),
                        filter=query.flt,
                    )
                )
            request = q.QueryRequest(
                limit=query.limit,
                prefetches=prefetches,
                query=q.Fusion.Rrf(k=RRF_K),
                filter=query.flt,
                with_payload=True,
                score_threshold=query.threshold,
            )
            points = shard.query(request)
        n = len(query.stages)
        return [Hit(rrf_scale(p.score, n), dict(p.payload or {})) for p in points]

    def nearest(
        self, stage: Stage, flt: Any, limit: int, *, with_payload: bool = True
    ) -> list[Candidate]:
        q = self.q
        shard = self._shard()
        with edge_errors(self.path, "query"):
            vector: Any = stage.dense
            if stage.sparse is not None:
                vector = q.SparseVector(stage.sparse.indices, stage.sparse.values)
            # The dense retriever's score is the cosine (Distance.Cosine); for the BM25
            # retriever's hits the store computes it (cosines): only BM25 vectors come back
            # (a dense vector as Python floats cost more than the query itself).
            dense_stage = stage.sparse is None
            request = q.QueryRequest(
                limit=limit,
                query=q.Query.Nearest(vector, using=stage.using),
                filter=flt,
                with_payload=with_payload,
                with_vector=[SPARSE],
            )
            points = shard.query(request)
            if with_payload:
                return [
                    _candidate(p.id, p.score, p.vector, p.payload, cosine=dense_stage)
                    for p in points
                ]
            # the hot path of every search: one Candidate per point, nothing converted twice
            out: list[Candidate] = []
            for p in points:
                score = float(p.score)
                sparse = (p.vector or _NO_VECTORS).get(SPARSE)
                tokens = sparse.indices if sparse is not None else None
                out.append(
                    Candidate(str(p.id), score, tokens or (), {}, score if dense_stage else None)
                )
            return out

    def retrieve(self, stages: Sequence[Stage], flt: Any, limit: int) -> list[list[Candidate]]:
        return nearest_each(self, stages, flt, limit)

    def cosines(self, dense: list[float], ids: Sequence[str]) -> dict[str, float]:
        if not ids:
            return {}
        q = self.q
        shard = self._shard()
        with edge_errors(self.path, "query"):
            request = q.QueryRequest(
                limit=len(ids),
                query=q.Query.Nearest(dense, using=DENSE),
                filter=q.Filter(must=[q.HasIdCondition(set(ids))]),
                params=q.SearchParams(exact=True),  # every id scored, whatever the planner
                with_payload=False,
                with_vector=False,
            )
            return {str(p.id): float(p.score) for p in shard.query(request)}

    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        shard = self._shard()
        with edge_errors(self.path, "query"):
            records = shard.retrieve(list(ids), with_payload=True, with_vector=False)
            return {str(r.id): dict(r.payload or {}) for r in records}

    def count(self) -> int:
        if self.shard is None:
            return 0
        with edge_errors(self.path, "query"):
            return int(self.shard.info().points_count)

    def count_matching(self, flt: Any) -> int:
        if self.shard is None:
            return 0
        with edge_errors(self.path, "query"):
            return int(self.shard.count(self.q.CountRequest(exact=True, filter=flt)))

    def flush(self) -> None:
        if self.shard is not None:
            with edge_errors(self.path, "write"):
                self.shard.flush()

    def rollback(self) -> None:
        """Nothing to discard: every write is in the shard's WAL already."""
        return None

    def optimize(self) -> None:
        """Run the shard's optimizers: the dense HNSW index is built for the segments that
        have grown past Qdrant's indexing threshold (until then a dense search scans them),
        and small segments are merged. Called after every ingest."""
        if self.shard is not None:
            with edge_errors(self.path, "write"):
                self.shard.optimize()

    def close(self) -> None:
        if self.shard is not None:
            shard, self.shard = self.shard, None
            with contextlib.suppress(Exception):
                shard.flush()
            with edge_errors(self.path, "write"):
                shard.close()


_NO_VECTORS: dict[str, Any] = {}

_KNOWN_CONFIG = frozenset({"payload_memory", "vectors", "sparse_vectors", "max_search_threads"})
_MEMORY = {"cold": "Cold", "cached": "Cached"}


def search_config(q: Any, path: Path) -> Any:
    """The ``EdgeConfig`` to load the shard in ``path`` with: its stored configuration with
    ``max_search_threads`` = :data:`SEARCH_THREADS` (the binding checks it against the
    shard and stores it), or ``None`` (load as stored) when the shard has it already or
    its configuration holds anything this function does not rebuild exactly (a shard
    gcite did not create: left as it is)."""
    try:
        stored = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(stored, dict) or not set(stored) <= _KNOWN_CONFIG:
        return None
    if stored.get("max_search_threads") == SEARCH_THREADS:
        return None
    try:
        vectors = {
            name: q.EdgeVectorParams(
                size=int(params["size"]), distance=getattr(q.Distance, params["distance"])
            )
            for name, params in stored.get("vectors", {}).items()
            if set(params) == {"size", "distance"}
        }
        sparse = {
            name: q.EdgeSparseVectorParams(modifier=getattr(q.Modifier, params["modifier"].title()))
            for name, params in stored.get("sparse_vectors", {}).items()
            if set(params) == {"modifier"}
        }
        memory = stored.get("payload_memory")
        if (
            len(vectors) != len(stored.get("vectors", {}))
            or len(sparse) != len(stored.get("sparse_vectors", {}))
            or (memory is not None and memory not in _MEMORY)
        ):
            return None
        return q.EdgeConfig(
            vectors=vectors,
            sparse_vectors=sparse,
            payload_memory=getattr(q.Memory, _MEMORY[memory]) if memory else None,
            max_search_threads=SEARCH_THREADS,
        )
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def _candidate(
    point_id: Any, score: Any, vectors: Any, payload: Any, *, cosine: bool = False
) -> Candidate:
    sparse = (vectors or {}).get(SPARSE)
    tokens = getattr(sparse, "indices", None) or ()
    return Candidate(
        str(point_id),
        float(score),
        tokens,
        dict(payload or {}),
        float(score) if cosine else None,
    )


__all__ = ["EdgeIndex", "EdgeModels", "edge_errors", "map_edge_error"]
