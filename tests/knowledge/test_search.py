"""Search on the real corpus: the Dify KR ``result`` shape, datasets, top-k, thresholds."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gcite.errors import StoreError

pytestmark = pytest.mark.corpus

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_result_items_have_the_dify_1x_shape(law_store: Any) -> None:
    items = law_store.store.search("消防设施每年全面检测", top_k=4)
    assert len(items) == 4
    for position, item in enumerate(items, start=1):
        assert set(item) >= {"content", "title", "metadata"}
        meta = item["metadata"]
        assert meta["_source"] == "knowledge"
        assert meta["dataset_name"] == law_store.dataset == "楼宇法规库"
        assert meta["data_source_type"] == "upload_file"
        assert meta["retriever_from"] == "workflow"
        assert meta["position"] == position
        assert UUID.match(meta["dataset_id"]) and UUID.match(meta["document_id"])
        assert UUID.match(meta["segment_id"])
        assert 0.0 < meta["score"] <= 1.0
        assert isinstance(meta["segment_position"], int) and meta["segment_position"] >= 1
        assert item["title"] == meta["document_name"] and item["title"].endswith(".md")
        assert item["content"] and item["content"] in item["content"]
        doc = meta["doc_metadata"]
        assert doc["document_title"]
        assert "source_file_url" in doc
    scores = [item["metadata"]["score"] for item in items]
    assert scores == sorted(scores, reverse=True)
    assert len({item["metadata"]["segment_id"] for item in items}) == 4


def test_manifest_metadata_reaches_doc_metadata(law_store: Any) -> None:
    items = law_store.store.search("个人信息处理者的义务", roles=["人事"], top_k=3)
    top = items[0]["metadata"]
    assert top["document_name"] == "个人信息保护法(2021-08-20).md"
    assert top["doc_metadata"]["document_title"] == "中华人民共和国个人信息保护法"
    assert top["doc_metadata"]["access_roles"] == ["法务", "人事"]
    assert top["doc_metadata"]["source_file_url"].endswith("geren-xinxi-baohu-fa.doc")


def test_law_article_is_found_whole(law_store: Any) -> None:
    items = law_store.store.search(
        "公用消火栓和报警器材的检测维修费用由谁承担", roles=["物业经理"], top_k=5
    )
    hit = [i for i in items if "第二十三条" in i["content"] and i["title"] == "北京市消防条例.md"]
    assert hit, [i["content"][:40] for i in items]
    assert "保修期" in hit[0]["content"]


def test_datasets_and_dataset_filter(law_store: Any) -> None:
    assert law_store.store.datasets() == ["楼宇法规库"]
    assert law_store.store.search("消防", dataset="楼宇法规库", top_k=2)
    with pytest.raises(StoreError, match="没有数据集"):
        law_store.store.search("消防", dataset="不存在的库")


def test_top_k_threshold_and_blank_query(law_store: Any) -> None:
    assert len(law_store.store.search("物业服务", top_k=1)) == 1
    assert len(law_store.store.search("物业服务", top_k=10_000)) == 100
    assert law_store.store.search("   ") == []
    all_items = law_store.store.search("物业服务", top_k=20)
    cut = sorted(i["metadata"]["score"] for i in all_items)[10]
    kept = law_store.store.search("物业服务", top_k=20, score_threshold=cut)
    assert kept and all(i["metadata"]["score"] >= cut for i in kept)
    assert len(kept) < len(all_items)
    long_query = "物业" * 50_000
    assert law_store.store.search(long_query, top_k=2)


def test_the_whole_corpus_is_ingested(law_store: Any) -> None:
    laws = sorted(p.name for p in (law_store.corpus_dir / "laws").glob("*.md"))
    assert len(laws) == 16
    docs = law_store.store.catalog.datasets[law_store.dataset]["documents"].values()
    assert sorted(d["name"] for d in docs) == laws
    assert law_store.store.count() == sum(d["segments"] for d in docs)
    for name in laws:
        title = name.split("(")[0].removesuffix(".md")
        items = law_store.store.search(title, top_k=10)
        assert name in {i["title"] for i in items}, name
