"""The qdrant-client adapter: a Qdrant server, or qdrant-client's local mode.

``url``: ``http(s)://...`` (a server; ``api_key`` optional), ``local:<dir>`` (local mode,
same API, used by the tests to stand for the server) or ``:memory:``. Collection
``gcite``. :func:`client_errors` is the one place the client's exceptions become
:class:`~gcite.errors.StoreError`. Source: qdrant-client docs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gcite.errors import StoreError
from gcite.knowledge.filters import FilterModels
from gcite.knowledge.stores.base import (
    COLLECTION,
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


@contextlib.contextmanager
def client_errors(message: str) -> Iterator[None]:
    """Run a block of client calls; any exception but StoreError -> ``StoreError(message: exc)``."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:  # httpx, grpc, qdrant_client.http exceptions, ValueError ...
        raise StoreError(f"{message}: {exc}") from exc


class ClientModels:
    """:class:`~gcite.knowledge.filters.FilterModels` for ``qdrant_client.models``."""

    def __init__(self) -> None:
        from qdrant_client import models

        self.m = models

    def match_value(self, key: str, value: str) -> Any:
        return self.m.FieldCondition(key=key, match=self.m.MatchValue(value=value))

    def match_any(self, key: str, values: list[str]) -> Any:
        return self.m.FieldCondition(key=key, match=self.m.MatchAny(any=values))

    def substring(self, key: str, value: str) -> Any:
        return self.m.FieldCondition(key=key, match=self.m.MatchSubstring(substring=value))

    def prefix(self, key: str, value: str) -> Any:
        return self.m.FieldCondition(key=key, match=self.m.MatchPrefix(prefix=value))

    def range(
        self,
        key: str,
        *,
        gt: float | None = None,
        gte: float | None = None,
        lt: float | None = None,
        lte: float | None = None,
    ) -> Any:
        return self.m.FieldCondition(key=key, range=self.m.Range(gt=gt, gte=gte, lt=lt, lte=lte))

    def is_empty(self, key: str) -> Any:
        return self.m.IsEmptyCondition(is_empty=self.m.PayloadField(key=key))

    def filter(
        self,
        must: list[Any] | None = None,
        should: list[Any] | None = None,
        must_not: list[Any] | None = None,
    ) -> Any:
        return self.m.Filter(must=must, should=should, must_not=must_not)


class QdrantIndex:
    """A :class:`~gcite.knowledge.stores.base.VectorIndex` through ``qdrant-client``."""

    def __init__(self, url: str, api_key: str = "", *, create: bool) -> None:
        from qdrant_client import QdrantClient, models

        self.m = models
        self.models: FilterModels = ClientModels()
        self.transactional = False
        self.url = url
        self._server = not (url.startswith("local:") or url == ":memory:")
        self._failure = f"Qdrant 请求失败 ({url})"
        with client_errors(f"无法连接 Qdrant ({url})"):
            if url.startswith("local:"):
                local = Path(url[len("local:") :]).expanduser()
                if not create and not local.exists():
                    raise StoreError(f"知识库目录不存在: {local}，请先运行 gcite ingest")
                self.client = QdrantClient(path=str(local))
            elif url == ":memory:":
                self.client = QdrantClient(location=":memory:")
            else:
                self.client = QdrantClient(
                    url=url, api_key=api_key or None, timeout=10, check_compatibility=False
                )
            self._ready = self.client.collection_exists(COLLECTION)

    def ensure(self, dim: int) -> None:
        if self._ready:
            return
        m = self.m
        with client_errors(f"无法在 Qdrant 中创建集合 {COLLECTION}"):
            self.client.create_collection(
                COLLECTION,
                vectors_config={DENSE: m.VectorParams(size=dim, distance=m.Distance.COSINE)},
                sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
            )
            if self._server:  # local mode ignores payload indexes (and warns)
                for key in INDEXED_KEYWORDS:
                    self.client.create_payload_index(COLLECTION, key, m.PayloadSchemaType.KEYWORD)
        self._ready = True

    def upsert(self, points: Sequence[PointData]) -> None:
        m = self.m
        if not points:
            return
        with client_errors(self._failure):
            items = [
                m.PointStruct(
                    id=p.id,
                    vector={
                        DENSE: p.dense,
                        SPARSE: m.SparseVector(indices=p.sparse.indices, values=p.sparse.values),
                    },
                    payload=p.payload,
                )
                for p in points
            ]
            self.client.upsert(COLLECTION, items, wait=True)

    def delete_document(self, document_id: str) -> None:
        self.delete_matching(
            self.m.Filter(must=[self.models.match_value("document_id", document_id)])
        )

    def delete_matching(self, flt: Any) -> None:
        if not self._ready:
            return
        with client_errors(self._failure):
            selector = self.m.FilterSelector(filter=flt)
            self.client.delete(COLLECTION, points_selector=selector, wait=True)

    def query(self, query: HybridQuery) -> list[Hit]:
        if not self._ready:
            raise StoreError("知识库为空: 尚未导入任何文档")
        m = self.m
        with client_errors(self._failure):
            prefetches = []
            for stage in query.stages:
                vector: Any = stage.dense
                if stage.sparse is not None:
                    vector = m.SparseVector(
                        indices=stage.sparse.indices, values=stage.sparse.values
                    )
                prefetches.append(
                    m.Prefetch(
                        query=vector, using=stage.using, limit=query.prefetch, filter=query.flt
                    )
                )
            response = self.client.query_points(
                COLLECTION,
                prefetch=prefetches,
                query=m.RrfQuery(rrf=m.Rrf(k=RRF_K)),
                query_filter=query.flt,
                limit=query.limit,
                with_payload=True,
                score_threshold=query.threshold,
            )
        n = len(query.stages)
        return [Hit(rrf_scale(p.score, n), dict(p.payload or {})) for p in response.points]

    def nearest(
        self, stage: Stage, flt: Any, limit: int, *, with_payload: bool = True
    ) -> list[Candidate]:
        if not self._ready:
            raise StoreError("知识库为空: 尚未导入任何文档")
        m = self.m
        with client_errors(self._failure):
            vector: Any = stage.dense
            if stage.sparse is not None:
                vector = m.SparseVector(indices=stage.sparse.indices, values=stage.sparse.values)
            response = self.client.query_points(
                COLLECTION,
                query=vector,
                using=stage.using,
                query_filter=flt,
                limit=limit,
                with_payload=with_payload,
                with_vectors=[SPARSE],
            )
        dense_stage = stage.sparse is None
        out = []
        for p in response.points:
            vectors: dict[str, Any] = dict(p.vector) if isinstance(p.vector, dict) else {}
            sparse = vectors.get(SPARSE)
            out.append(
                Candidate(
                    str(p.id),
                    float(p.score),
                    frozenset(int(i) for i in getattr(sparse, "indices", None) or []),
                    dict(p.payload or {}),
                    float(p.score) if dense_stage else None,
                )
            )
        return out

    def retrieve(self, stages: Sequence[Stage], flt: Any, limit: int) -> list[list[Candidate]]:
        return nearest_each(self, stages, flt, limit)

    def cosines(self, dense: list[float], ids: Sequence[str]) -> dict[str, float]:
        if not ids or not self._ready:
            return {}
        m = self.m
        with client_errors(self._failure):
            response = self.client.query_points(
                COLLECTION,
                query=dense,
                using=DENSE,
                query_filter=m.Filter(must=[m.HasIdCondition(has_id=list(ids))]),
                # a server scores every id whatever its planner picks (local mode always
                # searches exactly, and warns about the parameter)
                search_params=m.SearchParams(exact=True) if self._server else None,
                limit=len(ids),
                with_payload=False,
                with_vectors=False,
            )
        return {str(p.id): float(p.score) for p in response.points}

    def count(self) -> int:
        if not self._ready:
            return 0
        with client_errors(self._failure):
            return int(self.client.count(COLLECTION, exact=True).count)

    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids or not self._ready:
            return {}
        with client_errors(self._failure):
            records = self.client.retrieve(
                COLLECTION, ids=list(ids), with_payload=True, with_vectors=False
            )
            return {str(r.id): dict(r.payload or {}) for r in records}

    def count_matching(self, flt: Any) -> int:
        if not self._ready:
            return 0
        with client_errors(self._failure):
            return int(self.client.count(COLLECTION, count_filter=flt, exact=True).count)

    def flush(self) -> None:
        return None

    def rollback(self) -> None:
        """Nothing to discard: every write is acknowledged by the server already."""
        return None

    def optimize(self) -> None:
        """Nothing to do: a Qdrant server runs its optimizers by itself."""
        return None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()


__all__ = ["ClientModels", "QdrantIndex", "client_errors"]
