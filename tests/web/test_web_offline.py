"""The offline web source: saved pages answering in Bocha's shape (issue 5, item 2).

Most rules are checked with the light BM25 index; the default hybrid index (the
knowledge base's own search) has its own tests in test_web_offline_hybrid.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gcite
from gcite.config import Settings, load_settings
from gcite.errors import ConfigError, SourceTimeout, SourceUnavailable
from gcite.merge import merge_chunks
from gcite.web import OfflineWebSource, WebSource, make_web_source
from gcite.web.bm25 import Bm25Index
from gcite.web.pages import MAX_PAGE_BYTES, load_pages, parse_page, split_passages

SAMPLE_WEB = Path(gcite.__file__).parent / "sample_data" / "web"

PAGE = """---
title: 写字楼停电应急处置要点 - 物业之家
url: https://www.wuye-home.example/article/88
site_name: 物业之家
published_date: 2024-03-05
---

写字楼突然停电时，值班人员应先确认停电范围，再联系供电公司。

备用发电机应在十五分钟内启动，优先保障消防电梯和应急照明。
"""


def write(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def values(payload: dict[str, object]) -> list[dict[str, object]]:
    return payload["data"]["webPages"]["value"]  # type: ignore[index,no-any-return]


@pytest.fixture
def pages(tmp_path: Path) -> Path:
    shutil.copytree(SAMPLE_WEB, tmp_path / "web")
    write(tmp_path / "web", "power/outage.md", PAGE)
    return tmp_path / "web"


async def test_answers_in_bochas_shape(pages: Path) -> None:
    async with OfflineWebSource(pages, index="bm25") as source:
        assert isinstance(source, WebSource)
        assert source.name == "offline"
        payload = await source.search("停电 备用发电机", count=3)
    assert payload["code"] == 200
    assert payload["data"]["queryContext"]["originalQuery"] == "停电 备用发电机"
    top = values(payload)[0]
    assert top["name"] == "写字楼停电应急处置要点 - 物业之家"
    assert top["url"] == "https://www.wuye-home.example/article/88"
    assert top["siteName"] == "物业之家"
    assert top["datePublished"] == "2024-03-05"
    assert "备用发电机" in str(top["summary"])
    assert top["score"] == 1.0


async def test_relevant_page_first_and_count_enforced(pages: Path) -> None:
    source = OfflineWebSource(pages, index="bm25")
    payload = await source.search("干粉灭火器怎么用", count=2)
    found = values(payload)
    assert len(found) <= 2
    assert "灭火器" in str(found[0]["name"])
    assert len({item["url"] for item in found}) == len(found)  # one result per page
    everything = values(await source.search("的", count=50))
    assert len(everything) <= len(load_pages(pages))
    scores = [float(item["score"]) for item in values(await source.search("巡检 电梯", count=5))]  # type: ignore[arg-type]
    assert scores == sorted(scores, reverse=True)
    assert all(0 < s <= 1 for s in scores)


async def test_no_match_and_blank_query(pages: Path) -> None:
    source = OfflineWebSource(pages, index="bm25")
    assert values(await source.search("zzzqqq", count=5)) == []
    assert values(await source.search("   ", count=5)) == []
    assert values(await source.search("停电", count=0)) == []


async def test_feeds_the_merge_node(pages: Path) -> None:
    payload = await OfflineWebSource(pages, index="bm25").search("停电 备用发电机", count=1)
    [chunk] = merge_chunks([], payload)["chunk_metadata"]
    assert chunk["source_type"] == "web"
    assert chunk["document_title"] == "写字楼停电应急处置要点 - 物业之家"
    assert chunk["url"] == "https://www.wuye-home.example/article/88"
    assert chunk["display_subtitle"] == "物业之家 · 2024-03-05"
    assert "十五分钟" in chunk["content"]


async def test_folder_changes_are_picked_up(pages: Path) -> None:
    source = OfflineWebSource(pages, index="bm25")
    assert values(await source.search("雨水倒灌", count=3)) == []
    write(pages, "flood.md", "---\ntitle: 地下车库雨水倒灌怎么办\n---\n暴雨时地下车库雨水倒灌。")
    assert values(await source.search("雨水倒灌", count=3))[0]["name"] == "地下车库雨水倒灌怎么办"
    (pages / "flood.md").unlink()
    assert values(await source.search("雨水倒灌", count=3)) == []


async def test_pages_with_poor_metadata_are_kept(tmp_path: Path) -> None:
    write(tmp_path, "plain.md", "# 水泵房巡检\n\n水泵房每日巡检一次。")
    write(tmp_path, "broken.md", "---\ntitle: [unclosed\n---\n配电室钥匙由值班长保管。")
    write(tmp_path, "latin1.txt", "门禁卡补办流程".encode() + b"\xff\xfe")
    write(tmp_path, "ignored.pdf", b"%PDF-1.4")
    source = OfflineWebSource(tmp_path, index="bm25")
    plain = values(await source.search("水泵房", count=1))[0]
    assert plain["name"] == "水泵房巡检"  # first heading
    assert plain["url"] == (tmp_path / "plain.md").resolve().as_uri()
    assert plain["siteName"] == "" and plain["datePublished"] == ""
    broken = values(await source.search("配电室钥匙", count=1))[0]
    assert broken["name"] == "broken"  # file name
    assert "配电室钥匙" in str(broken["summary"])
    assert values(await source.search("门禁卡补办", count=1))[0]["name"] == "latin1"


def test_oversized_pages_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, "big.md", "巡" * (MAX_PAGE_BYTES // 3 + 10))
    write(tmp_path, "small.md", "巡检")
    assert [p.path.name for p in load_pages(tmp_path)] == ["small.md"]


def test_front_matter_dates() -> None:
    page = parse_page(Path("x.md"), "---\npublished_date: 2025-08-12 09:30:00\n---\nbody")
    assert page.published_date == "2025-08-12"
    page = parse_page(Path("x.md"), "---\npublished_date: 去年夏天\nurl: 7\n---\nbody")
    assert page.published_date == "去年夏天"
    assert page.url == "7"


def test_missing_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="离线网页文件夹不存在"):
        OfflineWebSource(tmp_path / "nope")
    with pytest.raises(ConfigError, match="离线网页文件夹不存在"):
        make_web_source(Settings.from_keys(web_provider="offline", web_dir=str(tmp_path / "nope")))


async def test_folder_removed_after_start(tmp_path: Path) -> None:
    folder = tmp_path / "web"
    write(folder, "a.md", "巡检")
    source = OfflineWebSource(folder, index="bm25")
    shutil.rmtree(folder)
    with pytest.raises(SourceUnavailable, match="无法读取离线网页文件夹"):
        await source.search("巡检", count=1)


async def test_search_slower_than_the_timeout(pages: Path) -> None:
    # Building the index takes longer than a nanosecond.
    source = OfflineWebSource(pages, index="bm25", timeout_s=1e-9)
    with pytest.raises(SourceTimeout):
        await source.search("停电", count=1)


async def test_make_web_source_offline(pages: Path, tmp_path: Path) -> None:
    flags = {"web_provider": "offline", "web_dir": str(pages), "web_timeout_s": 120}
    settings = load_settings(
        {**flags, "data_dir": tmp_path / "data"}, environ={"GCITE_WEB_OFFLINE_INDEX": "bm25"}
    )
    source = make_web_source(settings)
    assert isinstance(source, OfflineWebSource)
    assert source.index == "bm25"
    assert values(await source.search("停电", count=1))[0]["siteName"] == "物业之家"
    await source.aclose()
    assert not (tmp_path / "data").exists()  # BM25 keeps nothing on disk
    with pytest.raises(ConfigError, match="hybrid 或 bm25"):
        make_web_source(settings.with_keys(web_offline_index="vector"))


@given(st.lists(st.text(alphabet="巡检 \n电梯ab", max_size=300), max_size=6))
def test_passages_keep_every_character(paragraphs: list[str]) -> None:
    text = "\n\n".join(paragraphs)
    passages = split_passages(text, size=50)
    assert all(len(p) <= 50 for p in passages)
    assert "".join(passages).replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(
        " ", ""
    )


def test_bm25_prefers_rarer_matching_terms() -> None:
    index = Bm25Index(["电梯 巡检 记录", "巡检 巡检 记录", "消防 水泵"])
    hits = index.search("电梯巡检", top_k=3)
    assert [h.index for h in hits] == [0, 1]
    assert index.search("", top_k=3) == []
    assert index.search("电梯", top_k=0) == []
