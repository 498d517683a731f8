"""The scale-out path (qdrant-client) gives the same results as the embedded Qdrant Edge store.

No Qdrant server binary is installable from the reachable registries, so the
shared code path is exercised with qdrant-client's local mode
(``qdrant_url = "local:<dir>"``), the closest real component.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gcite.config import Settings
from gcite.errors import FilterError, StoreError
from gcite.knowledge import ingest_paths, open_store
from gcite.testing.corpus import MANIFEST, write_mixed

QUERIES = ["电梯维保记录", "停车场收费", "水箱清洗", "防火巡查", "boiler pressure"]
CONDITIONS: list[dict[str, Any] | None] = [
    None,
    {"name": "year", "comparison_operator": "≥", "value": 2019},
    {
        "logical_operator": "or",
        "conditions": [
            {"name": "document_title", "comparison_operator": "start with", "value": "停车"},
            {"not": {"name": "access_roles", "comparison_operator": "empty"}},
        ],
    },
]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    base = tmp_path_factory.mktemp("pair")
    write_mixed(base / "docs")
    (base / "manifest.json").write_text(json.dumps(MANIFEST, ensure_ascii=False), encoding="utf-8")
    edge = Settings.from_keys(data_dir=base / "edge", embed_backend="use")
    client = Settings.from_keys(
        data_dir=base / "client", embed_backend="use", qdrant_url=f"local:{base / 'qdrant'}"
    )
    for settings in (edge, client):
        report = ingest_paths(
            [base / "docs"],
            settings=settings,
            dataset="园区制度库",
            manifest=base / "manifest.json",
        )
        assert report.added == 5
    stores = (open_store(edge), open_store(client))
    yield stores
    for store in stores:
        store.close()


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("condition", CONDITIONS)
@pytest.mark.parametrize("roles", [None, [], ["运维工程师"]])
def test_same_results_on_both_backends(
    pair: tuple[Any, Any], query: str, condition: dict[str, Any] | None, roles: list[str] | None
) -> None:
    edge, client = pair
    a = edge.search(query, roles=roles, condition=condition, top_k=5)
    b = client.search(query, roles=roles, condition=condition, top_k=5)
    assert [i["metadata"]["segment_id"] for i in a] == [i["metadata"]["segment_id"] for i in b]
    assert [i["metadata"]["score"] for i in a] == pytest.approx(
        [i["metadata"]["score"] for i in b], abs=1e-4
    )


def test_client_backend_errors(pair: tuple[Any, Any], tmp_path: Path) -> None:
    _, client = pair
    with pytest.raises(FilterError):
        client.search("停车", condition={"name": "year", "comparison_operator": ">", "value": "x"})
    missing = Settings.from_keys(data_dir=tmp_path / "d", qdrant_url=f"local:{tmp_path / 'none'}")
    with pytest.raises(StoreError):
        open_store(missing)
    unreachable = Settings.from_keys(data_dir=tmp_path / "d2", qdrant_url="http://127.0.0.1:9")
    with pytest.raises(StoreError, match="Qdrant"):
        ingest_paths([tmp_path], settings=unreachable, dataset="x")


def _all_documents(store: Any) -> dict[str, list[str]]:
    """``{document_id: access_roles}`` of every document, read through unfiltered searches."""
    docs: dict[str, list[str]] = {}
    for query in QUERIES:
        for item in store.search(query, roles=None, top_k=100):
            meta = item["metadata"]
            docs[meta["document_id"]] = list(meta["doc_metadata"].get("access_roles") or [])
    return docs


@pytest.mark.parametrize("roles", [[], ["运维工程师"], ["未知角色"]])
def test_visible_document_ids_on_both_backends(pair: tuple[Any, Any], roles: list[str]) -> None:
    for store in pair:
        docs = _all_documents(store)
        assert any(docs.values()) and not all(docs.values())  # restricted and public documents
        expected = {d for d, needed in docs.items() if not needed or set(needed) & set(roles)}
        asked = [*docs, "no-such-document", ""]
        assert store.visible_document_ids(asked, roles=roles) == expected
        assert store.visible_document_ids(asked, roles=roles, dataset="园区制度库") == expected
        assert store.visible_document_ids(asked, roles=roles, dataset="别的库") == set()
        with pytest.raises(FilterError):
            store.visible_document_ids(asked, roles="运维工程师")
