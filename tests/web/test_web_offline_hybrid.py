"""The offline web source on its default index: the knowledge base's hybrid search.

The sample saved pages (plus one page written here) are ingested once per
module into a temporary data directory, with the bundled embedding model.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import gcite
from gcite.config import Settings
from gcite.knowledge.catalog import CATALOG_NAME, Catalog
from gcite.merge import merge_chunks
from gcite.web import OfflineWebSource, make_web_source
from gcite.web.offline import dataset_name

SAMPLE_WEB = Path(gcite.__file__).parent / "sample_data" / "web"

PAGE = """---
title: 写字楼停电应急处置要点 - 物业之家
url: https://www.wuye-home.example/article/88
site_name: 物业之家
published_date: 2024-03-05
---

写字楼突然停电时，值班人员应先确认停电范围，再联系供电公司。备用发电机应在十五分钟内启动，
优先保障消防电梯和应急照明。
"""


def values(payload: Any) -> list[dict[str, Any]]:
    return list(payload["data"]["webPages"]["value"])


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    root = tmp_path_factory.mktemp("offline-hybrid")
    shutil.copytree(SAMPLE_WEB, root / "web")
    (root / "web" / "outage.md").write_text(PAGE, encoding="utf-8")
    (root / "web" / "no-front-matter.md").write_text(
        "# 水泵房巡检要点\n\n水泵房每天巡检一次，检查水泵运行声音和压力表读数。", encoding="utf-8"
    )
    (root / "web" / "broken.md").write_text(
        "---\ntitle: [unclosed\n---\n配电室钥匙由值班长保管，借用须登记。", encoding="utf-8"
    )
    return Settings.from_keys(
        data_dir=root / "data", web_provider="offline", web_dir=str(root / "web"), web_timeout_s=120
    )


@pytest.fixture(scope="module")
async def source(settings: Settings) -> AsyncIterator[OfflineWebSource]:
    made = make_web_source(settings)  # hybrid, warming up in the background
    assert isinstance(made, OfflineWebSource)
    assert made.index == "hybrid"
    yield made
    await made.aclose()


async def test_finds_the_page_in_bochas_shape(source: OfflineWebSource) -> None:
    payload = await source.search("停电了备用发电机多久启动", count=3)
    assert payload["code"] == 200
    found = values(payload)
    assert 1 <= len(found) <= 3
    assert len({item["url"] for item in found}) == len(found)
    top = found[0]
    assert top["name"] == "写字楼停电应急处置要点 - 物业之家"
    assert top["url"] == "https://www.wuye-home.example/article/88"
    assert top["siteName"] == "物业之家"
    assert top["datePublished"] == "2024-03-05"
    assert "十五分钟" in top["summary"]
    assert 0 < top["score"] <= 1


async def test_page_fallbacks_and_the_merge_node(
    source: OfflineWebSource, settings: Settings
) -> None:
    payload = await source.search("水泵房巡检", count=1)
    [item] = values(payload)
    page = Path(settings.web.offline.dir) / "no-front-matter.md"
    assert item["name"] == "水泵房巡检要点"
    assert item["url"] == page.resolve().as_uri()
    [chunk] = merge_chunks([], payload)["chunk_metadata"]
    assert chunk["source_type"] == "web"
    assert chunk["document_title"] == "水泵房巡检要点"
    assert "压力表" in chunk["content"]


async def test_broken_front_matter_is_still_served(
    source: OfflineWebSource, settings: Settings
) -> None:
    # The knowledge base refuses such a file; the staged copy gets in.
    [item] = values(await source.search("配电室钥匙借用", count=1))
    assert item["name"] == "broken"
    assert item["url"] == (Path(settings.web.offline.dir) / "broken.md").resolve().as_uri()
    assert "值班长" in item["summary"]


async def test_kept_apart_from_the_knowledge_base(settings: Settings) -> None:
    # the web source holds its store open: its catalog is read as a file
    catalog = Catalog.load(Path(settings.data_dir) / "web-offline" / CATALOG_NAME)
    assert sorted(catalog.datasets) == [dataset_name(Path(settings.web.offline.dir))]
    # The web store lives below the data dir; the knowledge base's own catalog is not created.
    assert (Path(settings.data_dir) / "web-offline" / CATALOG_NAME).is_file()
    assert not (Path(settings.data_dir) / CATALOG_NAME).exists()


async def test_new_pages_are_ingested(source: OfflineWebSource, settings: Settings) -> None:
    extra = Path(settings.web.offline.dir) / "flood.md"
    extra.write_text(
        "---\ntitle: 地下车库雨水倒灌怎么办\nurl: https://flood.example/1\n---\n"
        "暴雨时地下车库雨水倒灌，应立即关闭挡水板并启动排水泵。",
        encoding="utf-8",
    )
    try:
        found = values(await source.search("地下车库雨水倒灌", count=2))
        assert found[0]["url"] == "https://flood.example/1"
    finally:
        extra.unlink()
    found = values(await source.search("地下车库雨水倒灌", count=5))
    assert "https://flood.example/1" not in [item["url"] for item in found]
