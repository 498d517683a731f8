"""Web payload envelopes and provider field mappings, from realistic payloads (fixtures/merge)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gcite.envelopes import MAX_ENVELOPE_DEPTH, extract_web_items, to_web_chunk, web_chunks_from

FIXTURES = Path(__file__).parent / "fixtures" / "merge"


def web_input(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))["inputs"]["web_chunks"]


# -- envelopes ---------------------------------------------------------------------------------


def test_baidu_search_node_output() -> None:
    raw = web_input("mobile_2_1.json")  # [{"references": [...], "request_id": ...}]
    assert extract_web_items(raw) == raw[0]["references"]


def test_baidu_response_without_the_list() -> None:
    raw = web_input("mobile_2_1.json")[0]
    assert extract_web_items(raw) == raw["references"]


def test_tool_envelope_with_baidu_payload() -> None:
    raw = web_input("web_baidu_tool_envelope.json")  # {"text", "files", "json": [{references}]}
    assert extract_web_items(raw) == raw["json"][0]["references"]


def test_tavily_raw_response() -> None:
    raw = web_input("web_tavily_raw.json")
    assert extract_web_items(raw) == raw["results"]


def test_tool_json_list_with_tavily_payload() -> None:
    raw = web_input("web_tavily_tool_json.json")  # the Tool node's json output: [tavily_raw]
    assert extract_web_items(raw) == raw[0]["results"]


def test_bocha_raw_response_and_its_parts() -> None:
    raw = web_input("web_bocha_raw.json")
    items = raw["data"]["webPages"]["value"]
    assert extract_web_items(raw) == items  # images.value is not taken
    assert extract_web_items(raw["data"]) == items
    assert extract_web_items(raw["data"]["webPages"]) == items
    assert extract_web_items({"value": items}) == items  # seed §4: { value: [...] }


def test_plain_list() -> None:
    raw = web_input("web_plain_list.json")
    assert extract_web_items(raw) == raw


def test_json_string_payload() -> None:
    raw = web_input("rag_external_and_qa.json")
    assert isinstance(raw, str)
    assert extract_web_items(raw) == json.loads(raw)


def test_tool_without_json_message_gives_nothing() -> None:
    assert extract_web_items(web_input("web_tool_no_results.json")) == []


def test_several_envelopes_in_one_list_are_concatenated_in_order() -> None:
    baidu = web_input("mobile_2_1.json")[0]
    tavily = web_input("web_tavily_raw.json")
    plain = web_input("web_plain_list.json")[0]
    items = extract_web_items([baidu, tavily, plain])
    assert items == [*baidu["references"], *tavily["results"], plain]


def test_deepest_realistic_wrapping_is_unwrapped() -> None:
    bocha = web_input("web_bocha_raw.json")
    wrapped = json.dumps([{"text": "", "files": [], "json": [bocha]}], ensure_ascii=False)
    assert extract_web_items(wrapped) == bocha["data"]["webPages"]["value"]


def test_single_item_dict() -> None:
    item = {"title": "单条结果", "url": "https://example.com/a", "content": "正文"}
    assert extract_web_items(item) == [item]


@pytest.mark.parametrize(
    "raw",
    [None, [], {}, "", "   ", "not json", "[{broken", 0, 3.5, True, {"references": "x"}, [None, 1]],
)
def test_nothing_usable_gives_empty_list(raw: Any) -> None:
    assert extract_web_items(raw) == []


def test_non_dict_items_are_skipped_and_dicts_kept() -> None:
    good = {"url": "https://example.com/", "snippet": "保留"}
    assert extract_web_items([None, "x", 3, ["y"], good, {"foo": 1}]) == [good]


def test_nesting_deeper_than_the_limit_is_ignored() -> None:
    item = {"url": "https://example.com/", "content": "深"}
    shallow: Any = [item]
    for _ in range(MAX_ENVELOPE_DEPTH // 2):  # each wrap adds two levels (dict, list)
        shallow = {"json": [shallow]}
    assert extract_web_items(shallow) == [item]
    deep: Any = [item]
    for _ in range(MAX_ENVELOPE_DEPTH * 3):
        deep = {"json": [deep]}
    assert extract_web_items(deep) == []
    very_deep: Any = item
    for _ in range(5000):  # would blow the recursion limit without the depth guard
        very_deep = [very_deep]
    assert extract_web_items(very_deep) == []


# -- provider field mappings ------------------------------------------------------------------


def test_baidu_reference_mapping() -> None:
    refs = web_input("web_baidu_tool_envelope.json")["json"][0]["references"]
    assert to_web_chunk(refs[0]) == {
        "title": "物业管理条例（2025年修订）_国务院文件_中国政府网",
        "url": "https://www.gov.cn/zhengce/content/202511/content_7049001.htm",
        "content": refs[0]["content"],  # content (≤2000 chars) preferred over snippet
        "site_name": "中国政府网",  # web_anchor
        "published_date": "2025-11-20",
        "score": 0.95,  # authority_score (no plain score)
    }
    second = to_web_chunk(refs[1])
    assert second["site_name"] == "mohurd.gov.cn"  # empty web_anchor → website without www.
    assert second["published_date"] == "2026-03-18"  # "2026-03-18 10:30:00"
    assert second["score"] == 0.90  # authority_score given as a string
    video = to_web_chunk(refs[2])
    assert video["content"] == ""  # a video reference has no text: dropped later
    assert video["score"] == 0.40  # rerank_score when authority_score is absent


def test_tavily_result_mapping() -> None:
    result = web_input("web_tavily_raw.json")["results"][1]
    assert to_web_chunk(result) == {
        "title": "Elevator inspection intervals explained",
        "url": "http://liftguide.example.org:8080/inspection?lang=zh",
        "content": result["content"],
        "site_name": "",
        "published_date": "",
        "score": 0.5391,
    }
    news = to_web_chunk(web_input("web_tavily_tool_json.json")[0]["results"][0])
    assert news["published_date"] == "2026-03-02"  # RFC 2822 published_date


def test_bocha_value_mapping() -> None:
    values = web_input("web_bocha_raw.json")["data"]["webPages"]["value"]
    assert to_web_chunk(values[0]) == {
        "title": "写字楼中央空调节能运行的十个要点",  # name
        "url": "https://www.sohu.com/a/791234567_121124366",
        "content": values[0]["summary"],  # summary preferred over snippet
        "site_name": "搜狐网",  # siteName
        "published_date": "2024-07-22",  # datePublished
        "score": 0.0,  # Bocha gives no score
    }
    second = to_web_chunk(values[1])
    assert second["content"] == values[1]["snippet"]  # no summary → snippet
    assert second["site_name"] == ""  # empty siteName and no other site field
    assert second["published_date"] == "2025-01-09"  # dateLastCrawled as the last resort


def test_standard_item_mapping() -> None:
    item = web_input("web_plain_list.json")[0]
    assert to_web_chunk(item) == {
        "title": "会议室管理制度范本",
        "url": "https://wenku.baidu.com/view/3f2e1d0c.html",
        "content": item["snippet"],
        "site_name": "百度文库",
        "published_date": "2023-04-06",
        "score": 0.62,
    }


@pytest.mark.parametrize(
    ("item", "field", "expected"),
    [
        ({"date": "昨天", "published_date": "2025-08-12"}, "published_date", "2025-08-12"),
        (
            {"datePublished": "", "dateLastCrawled": "2024-01-02T00:00:00Z"},
            "published_date",
            "2024-01-02",
        ),
        ({"score": float("nan"), "authority_score": "0.5"}, "score", 0.5),
        ({"score": "high", "rerank_score": 0.2}, "score", 0.2),
        ({"score": True}, "score", 0.0),
        ({"title": "", "name": "名称"}, "title", "名称"),
        ({"url": "", "link": "https://serp.example.com/r"}, "url", "https://serp.example.com/r"),
        ({"content": "  ", "summary": "", "snippet": " 摘要 "}, "content", "摘要"),
        ({"site_name": " ", "siteName": "博查站"}, "site_name", "博查站"),
        ({"website": "www.gov.cn"}, "site_name", "gov.cn"),
        ({"content": {"nested": "x"}, "snippet": "兜底"}, "content", "兜底"),
    ],
)
def test_field_fallbacks(item: dict[str, Any], field: str, expected: Any) -> None:
    assert to_web_chunk(item)[field] == expected  # type: ignore[literal-required]


def test_web_chunks_from_combines_both_steps() -> None:
    raw = web_input("web_tavily_raw.json")
    assert web_chunks_from(raw) == [to_web_chunk(r) for r in raw["results"]]
