"""Every store backend of the registry passes the one store contract, in each layout.

The contract run is parametrised by :data:`gcite.registry.STORE_BACKENDS`: a backend
without an entry in :data:`LAYOUTS` fails here. ``qdrant`` runs as Qdrant Edge and through
qdrant-client, whose local mode (``qdrant_url = "local:<dir>"``) stands for a Qdrant
server (no server binary is installable from the reachable registries); ``pgvector`` on a
real PostgreSQL (``tests/support/pg.py``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gcite.config import Settings
from gcite.errors import StoreError
from gcite.knowledge import ingest_paths, open_store
from gcite.knowledge.sparse import Sparse
from gcite.knowledge.store import StoreHandles
from gcite.knowledge.stores.base import PointData, hybrid_query
from gcite.knowledge.stores.edge import EdgeIndex, map_edge_error
from gcite.knowledge.stores.qdrant import QdrantIndex
from gcite.registry import STORE_BACKENDS
from gcite.testing.corpus import MANIFEST, write_mixed
from gcite.testing.store_contract import DATASET, KnowledgeStoreContract
from support.pg import fresh_database


def _ingested(base: Path, settings: Settings) -> Settings:
    write_mixed(base / "docs")
    manifest = base / "manifest.json"
    manifest.write_text(json.dumps(MANIFEST, ensure_ascii=False), encoding="utf-8")
    report = ingest_paths([base / "docs"], settings=settings, dataset=DATASET, manifest=manifest)
    assert report.added == 5
    return settings


@pytest.fixture(scope="module")
def edge_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    base = tmp_path_factory.mktemp("edge-contract")
    return _ingested(base, Settings.from_keys(data_dir=base / "data", embed_backend="use"))


@pytest.fixture(scope="module")
def client_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    base = tmp_path_factory.mktemp("client-contract")
    settings = Settings.from_keys(
        data_dir=base / "data", embed_backend="use", qdrant_url=f"local:{base / 'qdrant'}"
    )
    return _ingested(base, settings)


def pg_keys(data_dir: Path, url: str) -> Settings:
    """Settings of the pgvector store in the database at ``url``."""
    return Settings.from_keys(
        data_dir=data_dir, embed_backend="use", store="pgvector", knowledge_database_url=url
    )


@pytest.fixture(scope="module")
def pgvector_settings(tmp_path_factory: pytest.TempPathFactory, pgvector_url: str) -> Settings:
    base = tmp_path_factory.mktemp("pgvector-contract")
    return _ingested(base, pg_keys(base / "data", fresh_database(pgvector_url)))


#: Each store backend's layouts -> the fixture giving settings of an ingested contract corpus.
LAYOUTS: dict[str, dict[str, str]] = {
    "qdrant": {"edge": "edge_settings", "client": "client_settings"},
    "pgvector": {"pgvector": "pgvector_settings"},
}


@pytest.fixture(
    scope="module",
    params=[
        f"{backend}/{layout}"
        for backend in sorted(STORE_BACKENDS)
        for layout in LAYOUTS.get(backend, {"no-contract-run": ""})
    ],
)
def contract_settings(request: pytest.FixtureRequest) -> Settings:
    backend, layout = str(request.param).split("/")
    fixture = LAYOUTS.get(backend, {}).get(layout)
    if fixture is None:
        pytest.fail(f"store backend {backend!r} has no contract run: add it to LAYOUTS")
    settings: Settings = request.getfixturevalue(fixture)
    assert settings.knowledge.store == backend
    return settings


class TestEveryStoreBackend(KnowledgeStoreContract):
    @pytest.fixture
    def handles(self) -> StoreHandles:
        return StoreHandles()

    @pytest.fixture
    def store(self, contract_settings: Settings, handles: StoreHandles) -> Iterator[Any]:
        with open_store(contract_settings, handles=handles) as store:
            yield store

    @pytest.fixture
    def reopen(self, contract_settings: Settings, handles: StoreHandles) -> Callable[[], Any]:
        return lambda: open_store(contract_settings, handles=handles)


def test_every_layout_is_a_registered_backend() -> None:
    assert set(LAYOUTS) == set(STORE_BACKENDS)


# --------------------------------------------------------------------------- the adapters


def _point(i: int) -> PointData:
    return PointData(
        id=f"00000000-0000-4000-8000-{i:012d}",
        dense=[1.0, float(i), 0.0, 0.5],
        sparse=Sparse([i + 1], [1.0]),
        payload={"document_id": f"d{i}", "dataset_name": "x"},
    )


@pytest.mark.parametrize("kind", ["edge", "client"])
def test_vector_index_adapters_answer_the_same_plan(kind: str, tmp_path: Path) -> None:
    index: Any = (
        EdgeIndex(tmp_path / "shard", create=True)
        if kind == "edge"
        else QdrantIndex(f"local:{tmp_path / 'q'}", create=True)
    )
    try:
        index.ensure(4)
        index.upsert([_point(i) for i in range(5)])
        assert index.count() == 5
        plan = hybrid_query(
            [1.0, 2.0, 0.0, 0.5], Sparse([3], [1.0]), None, limit=3, prefetch=10, threshold=None
        )
        assert plan is not None and [s.using for s in plan.stages] == ["dense", "bm25"]
        hits = index.query(plan)
        assert hits[0].payload["document_id"] == "d2"  # first in both stages
        assert hits[0].score == pytest.approx(1.0)
        index.delete_document("d2")
        assert index.count() == 4
        flt = index.models.filter(must=[index.models.match_value("document_id", "d1")])
        assert index.count_matching(flt) == 1
    finally:
        index.close()
        index.close()


def test_a_plan_needs_a_vector() -> None:
    assert hybrid_query(None, Sparse([], []), None, limit=1, prefetch=1, threshold=None) is None


@pytest.mark.parametrize("kind", ["edge", "client"])
def test_adapter_failures_are_store_errors(kind: str, tmp_path: Path) -> None:
    """No SDK exception escapes an adapter: a bad query is a StoreError."""
    index: Any = (
        EdgeIndex(tmp_path / "shard", create=True)
        if kind == "edge"
        else QdrantIndex(f"local:{tmp_path / 'q'}", create=True)
    )
    try:
        plan = hybrid_query([1.0], None, None, limit=1, prefetch=1, threshold=None)
        assert plan is not None
        with pytest.raises(StoreError):  # nothing stored yet
            index.query(plan)
        index.ensure(4)
        with pytest.raises(StoreError):  # wrong dimension: the SDK's own error, mapped
            index.query(plan)
    finally:
        index.close()


def test_edge_error_mapper() -> None:
    path = Path("/data/qdrant")
    held = map_edge_error(Exception("WouldBlock: lock held"), path, "open")
    assert "正被另一个进程使用" in str(held)
    assert "数据损坏" in str(map_edge_error(Exception("bad segment"), path, "open"))
    assert "查询失败" in str(map_edge_error(Exception("bad vector"), path, "query"))
    assert "写入失败" in str(map_edge_error(Exception("disk full"), path, "write"))


@pytest.mark.parametrize("which", ["edge", "client"])
def test_index_cosines_match_the_dense_retriever(
    which: str, edge_settings: Settings, client_settings: Settings
) -> None:
    """The BM25 retriever's candidates come without dense vectors; the store computes their
    cosines (``VectorIndex.cosines``), equal to the dense retriever's score of the point."""
    from gcite.knowledge.sparse import query_vector
    from gcite.knowledge.stores.base import DENSE, SPARSE, Stage

    settings = edge_settings if which == "edge" else client_settings
    with open_store(settings) as store:
        index = store._handle.index
        question = "电梯困人怎么处理"
        dense = [float(x) for x in store.embedder().embed_query(question)]
        everything = index.nearest(Stage(DENSE, dense=dense), None, 1000, with_payload=False)
        assert len(everything) > 5
        truth = {c.id: c.cosine for c in everything}
        assert all(isinstance(v, float) for v in truth.values())
        lexical = index.nearest(
            Stage(SPARSE, sparse=query_vector(question)), None, 10, with_payload=False
        )
        assert lexical and all(c.cosine is None for c in lexical)
        assert all(c.tokens for c in lexical)  # BM25 token ids for the lexical coverage
        ids = [c.id for c in lexical]
        unknown = "00000000-0000-0000-0000-000000000000"
        got = index.cosines(dense, [*ids, unknown])
        assert set(got) == set(ids)
        for point_id in ids:
            assert got[point_id] == pytest.approx(truth[point_id], abs=1e-5)
        assert index.cosines(dense, []) == {}


@pytest.mark.parametrize("which", ["edge", "client"])
def test_candidates_carry_the_stored_bm25_tokens_and_score_by_relevance(
    which: str, edge_settings: Settings, client_settings: Settings
) -> None:
    """The candidates of a search (no payloads) hold the token ids of the point's stored BM25
    vector, the same as with payloads, and ``score_candidates`` scores each one by
    ``relevance(cosine, lexical_coverage(query weights, tokens))``."""
    from gcite.knowledge.relevance import calibration_for, lexical_coverage, relevance
    from gcite.knowledge.sparse import document_vector, query_terms
    from gcite.knowledge.store import score_candidates, with_cosines
    from gcite.knowledge.stores.base import DENSE, SPARSE, Stage

    settings = edge_settings if which == "edge" else client_settings
    with open_store(settings) as store:
        index = store._handle.index
        question = "电梯困人怎么处理，物业要多久到场"
        dense = [float(x) for x in store.embedder().embed_query(question)]
        sparse, weights = query_terms(question)
        stages = [Stage(DENSE, dense=dense), Stage(SPARSE, sparse=sparse)]
        bare = [index.nearest(stage, None, 10, with_payload=False) for stage in stages]
        full = [index.nearest(stage, None, 10, with_payload=True) for stage in stages]
        assert bare[0] and bare[1]
        # what ingestion indexes: the document title, a newline, the chunk text
        texts = {
            c.id: f"{c.payload['doc_metadata']['document_title']}\n{c.payload['content']}"
            for found in full
            for c in found
        }
        for found_bare, found_full in zip(bare, full, strict=True):
            assert [c.id for c in found_bare] == [c.id for c in found_full]
            for b, f in zip(found_bare, found_full, strict=True):
                assert b.payload == {} and f.payload
                assert set(b.tokens) == set(f.tokens)
                assert set(b.tokens) == set(document_vector(texts[b.id]).indices)
        found = with_cosines(bare, lambda ids: index.cosines(dense, ids))
        calibration = calibration_for(store.catalog.embedder)
        hits = score_candidates(found, weights, calibration)
        first: dict[str, Any] = {}
        for candidates in found:
            for c in candidates:
                first.setdefault(c.id, c)
        scores = {h.id: h.score for h in hits}
        assert len(hits) == len(first)
        assert [h.id for h in hits] == sorted(first, key=lambda i: -scores[i])  # ties: merged
        for hit in hits:
            c = first[hit.id]
            expected = relevance(c.cosine, lexical_coverage(weights, set(c.tokens)), calibration)
            assert hit.score == expected
        assert any(0 < lexical_coverage(weights, set(c.tokens)) < 1 for c in first.values())


def test_a_failed_cosine_query_leaves_the_search_working(
    edge_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The BM25 candidates' cosines are a second query; when it fails the search still
    answers (those candidates scored on their words alone) and the failure is logged."""
    with open_store(edge_settings) as store:
        question = "电梯困人怎么处理"
        assert store.search(question, roles=None)

        def broken(dense: list[float], ids: Any) -> dict[str, float]:
            raise StoreError("知识库查询失败: test")

        monkeypatch.setattr(store._handle.index, "cosines", broken)
        assert store.search(question, roles=None)


def test_edge_shards_search_with_one_pool_thread(edge_settings: Settings, tmp_path: Path) -> None:
    """A shard gcite creates has a one-thread search pool (stores.edge.SEARCH_THREADS); a
    shard stored without the setting gets it when loaded, its other settings kept and its
    results unchanged; a configuration with settings gcite does not rebuild is left as it
    is."""
    import qdrant_edge

    from gcite.knowledge.stores.edge import CONFIG_FILE, SEARCH_THREADS, search_config

    shard = Path(edge_settings.data_dir) / "qdrant"
    created = json.loads((shard / CONFIG_FILE).read_text(encoding="utf-8"))
    assert created["max_search_threads"] == SEARCH_THREADS == 1
    assert search_config(qdrant_edge, shard) is None  # nothing to change: loaded as stored

    question = "电梯困人怎么处理"
    with open_store(edge_settings) as store:
        expected = store.search(question, top_k=10)
    # the same data, as a shard stored before the setting existed
    data = tmp_path / "data"
    shutil.copytree(edge_settings.data_dir, data)
    older = {k: v for k, v in created.items() if k != "max_search_threads"}
    (data / "qdrant" / CONFIG_FILE).write_text(json.dumps(older), encoding="utf-8")
    config = search_config(qdrant_edge, data / "qdrant")
    assert config is not None and config.max_search_threads == 1
    with open_store(Settings.from_keys(data_dir=data, embed_backend="use")) as store:
        assert store.search(question, top_k=10) == expected
    assert json.loads((data / "qdrant" / CONFIG_FILE).read_text(encoding="utf-8")) == created

    unknown = {**older, "hnsw_config": {"m": 8}}
    (data / "qdrant" / CONFIG_FILE).write_text(json.dumps(unknown), encoding="utf-8")
    assert search_config(qdrant_edge, data / "qdrant") is None
    (data / "qdrant" / CONFIG_FILE).write_text("{not json", encoding="utf-8")
    assert search_config(qdrant_edge, data / "qdrant") is None


@pytest.mark.parametrize(
    "roles",
    [
        [],
        ["运维工程师"],
        ["安保主管", "运维工程师"],
        [" 运维工程师 "],
        ["运维工程师,安保主管"],
        ["没有这个角色"],
    ],
)
def test_the_catalogs_role_rule_is_the_search_filters(
    contract_settings: Settings, roles: list[str]
) -> None:
    """The documents whose words make a role set's query vocabulary (the catalog's roles
    under :func:`~gcite.knowledge.filters.role_visibility`) are exactly those whose chunks
    the index's role filter lets the role set see."""
    from gcite.knowledge.store import visible_documents

    with open_store(contract_settings) as store:
        everything = {d for d, _, _ in visible_documents(store.catalog, None)}
        assert len(everything) == 5
        by_catalog = {d for d, _, _ in visible_documents(store.catalog, roles)}
        assert by_catalog == store.visible_document_ids(sorted(everything), roles=roles)
