"""Renderers: HTML per mobile design document §4.3/§5.2, Markdown, terminal."""

from __future__ import annotations

import re
from typing import Any

from gcite.stream import (
    build_panel,
    parse_all,
    render_html,
    render_markdown,
    render_panel_html,
    render_sources_terminal,
    render_terminal,
    superscript,
)

# mobile design document §2.3 (subset) with §4.3's answer
CHUNKS: list[dict[str, Any]] = [
    {"id": "2", "source_type": "rag", "document_title": "物业管理制度 · 异常上报处理",
     "display_subtitle": "测试知识库20260610", "url": "oss://kb-raw/2026/06/制度.pdf"},
    {"id": "6", "source_type": "web", "document_title": "物业巡检分类 - 百度百科",
     "display_subtitle": "百度百科 · 2025-09-01", "url": "https://baike.baidu.com/item/巡检"},
    {"id": "7", "source_type": "web", "document_title": "物业巡检流程标准 - 知乎",
     "display_subtitle": "知乎 · 2025-08-12", "url": "https://www.zhihu.com/question/123"},
]  # fmt: skip
ANSWER = (
    "巡更人员需要先在终端登录[C:7]。登录后系统会根据预设路线生成待检点[C:2]。"
    "巡检时如发现异常，可在终端直接上报[C:6]。这是SOP规定的紧急响应流程[C:2]。"
)


def parsed() -> tuple[Any, Any]:
    result = parse_all(ANSWER, ["2", "6", "7"])
    return result.segments, build_panel(result.citations, CHUNKS)


def test_html_matches_seed_dom() -> None:
    segments, _ = parsed()
    html = render_html(segments)

    def sup(raw: str, idx: int) -> str:
        return f'<sup class="g-cite" data-raw-id="{raw}" data-idx="{idx}">{idx}</sup>'

    assert html == (
        f"巡更人员需要先在终端登录{sup('7', 1)}。登录后系统会根据预设路线生成待检点{sup('2', 2)}。"
        f"巡检时如发现异常，可在终端直接上报{sup('6', 3)}。这是SOP规定的紧急响应流程{sup('2', 2)}。"
    )


def test_html_escapes_all_text_and_attributes() -> None:
    html = render_html(
        [{"text": "<script>alert(\"x\")</script> & 'q'"}, {"cite": '1"><b>', "idx": 1}]
    )
    assert "<script>" not in html and "<b>" not in html
    assert html.startswith("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;q&#x27;")
    assert 'data-raw-id="1&quot;&gt;&lt;b&gt;"' in html


def test_panel_html_follows_seed_markup_in_display_order() -> None:
    _, panel = parsed()
    html = render_panel_html(panel)
    items = re.findall(
        r'<div class="g-cite-item" data-raw-id="(\d+)" data-source-type="(\w+)">', html
    )
    assert items == [("7", "web"), ("2", "rag"), ("6", "web")]
    assert html.startswith('<div class="citation-panel">') and html.endswith("</div>")
    assert re.findall(r"<sup>(\d+)</sup>", html) == ["1", "2", "3"]
    icons = re.findall(r'<i class="fa-solid (fa-[\w-]+) g-cite-item-icon"></i>', html)
    assert icons == ["fa-globe", "fa-file-lines", "fa-globe"]
    assert '<span class="g-cite-item-subtitle">知乎 · 2025-08-12</span>' in html
    # web URLs are links, the oss:// file of the RAG chunk is not
    assert html.count("<a ") == 2
    assert 'href="https://www.zhihu.com/question/123"' in html
    assert "oss://" not in html


def test_panel_html_is_escaped_and_refuses_unsafe_links() -> None:
    panel = build_panel(
        [("1", 1), ("2", 2), ("3", 3)],
        [
            {"id": "1", "source_type": "web", "document_title": "<img src=x onerror=1>",
             "display_subtitle": "a&b", "url": "javascript:alert(1)"},
            {"id": "2", "source_type": "web", "document_title": "t",
             "display_subtitle": "", "url": 'https://e.com/"onmouseover="x'},
            {"id": "3", "source_type": "rag", "document_title": "", "display_subtitle": ""},
        ],
    )  # fmt: skip
    html = render_panel_html(panel)
    assert "<img" not in html and "&lt;img src=x onerror=1&gt;" in html
    assert "javascript:" not in html
    assert 'href="https://e.com/&quot;onmouseover=&quot;x"' in html
    assert "a&amp;b" in html
    assert html.count("g-cite-item-subtitle") == 1  # empty subtitles are not rendered (§3.6)
    assert "来源 3" in html  # no title: a fallback label


def test_empty_panel_renders_nothing() -> None:
    assert render_panel_html([]) == ""
    assert render_sources_terminal([]) == ""


def test_markdown_has_superscripts_in_place_and_a_source_list() -> None:
    segments, panel = parsed()
    md = render_markdown(segments, panel)
    body, _, notes = md.partition("\n\n来源：\n\n")
    assert body.startswith("巡更人员需要先在终端登录¹。") and "流程²。" in body
    zhihu = "[物业巡检流程标准 - 知乎](<https://www.zhihu.com/question/123>)"
    baike = "[物业巡检分类 - 百度百科](<https://baike.baidu.com/item/巡检>)"
    assert notes.splitlines() == [
        f"1. {zhihu} · 知乎 · 2025-08-12",
        "2. 物业管理制度 · 异常上报处理 · 测试知识库20260610",
        f"3. {baike} · 百度百科 · 2025-09-01",
    ]


def test_markdown_escapes_titles_and_covers_unknown_sources() -> None:
    md = render_markdown(
        [{"text": "x"}, {"cite": "5", "idx": 1}],
        build_panel([("5", 1)], {"5": {"document_title": "[a](javascript:x) *b*"}}),
    )
    assert "1. \\[a\\](javascript:x) \\*b\\*" in md
    md = render_markdown([{"text": "x"}, {"cite": "5", "idx": 1}], [])
    assert md.endswith("1. 来源 5\n")
    assert render_markdown([{"text": "只有文字"}], []) == "只有文字"


def _tokens(markdown: str) -> list[Any]:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    out: list[Any] = []
    for token in md.parse(markdown):
        out.append(token)
        out.extend(token.children or [])
    return out


def _md(answer: str, known: list[str]) -> str:
    result = parse_all(answer, known)
    chunks = [
        {"id": k, "document_title": f"文档{k}", "url": f"https://kb.example/{k}"} for k in known
    ]
    return render_markdown(result.segments, build_panel(result.citations, chunks))


def test_markdown_marker_before_a_url_is_not_a_link() -> None:
    md = _md("见[C:1](https://evil.example/x)。", ["1"])
    assert md.startswith("见¹(https://evil.example/x)。")
    hrefs = [t.attrGet("href") for t in _tokens(md) if t.type == "link_open"]
    assert hrefs == ["https://kb.example/1"]  # only the source list links


def test_markdown_line_starting_with_a_marker_is_not_a_definition() -> None:
    md = _md("说明：\n\n[C:2]: https://evil.example/def\n\n见[原文][C:2]。", ["2"])
    assert "\n¹: https://evil.example/def\n" in md
    body = md.split("来源：")[0]
    inline = [t for t in _tokens(body) if t.type == "inline"]
    assert any("¹: https://evil.example/def" in t.content for t in inline)
    assert not [t for t in _tokens(body) if t.type == "link_open"]


def test_markdown_model_footnote_stays_the_models() -> None:
    md = _md("模型自己的脚注[^1]，引用[C:1]。\n\n[^1]: 模型的注释", ["1"])
    assert md.count("[^1]") == 2 and "[^1]: 模型的注释" in md
    assert "引用¹。" in md
    assert "[^1]: [文档1]" not in md and "1. [文档1](<https://kb.example/1>)" in md


def test_markdown_marker_in_image_alt_text_stays_alt_text() -> None:
    md = _md("![示意图[C:1]](https://img.example/a.png)", ["1"])
    assert md.startswith("![示意图¹](https://img.example/a.png)")
    images = [t for t in _tokens(md) if t.type == "image"]
    assert len(images) == 1 and images[0].content == "示意图¹"


def test_markdown_adjacent_citations_and_an_open_fence() -> None:
    md = _md("一次[C:1][C:2]。\n\n```\ncode", ["1", "2"])
    assert "一次¹˒²。" in md
    assert "```\ncode\n```\n\n来源：" in md
    fences = [t for t in _tokens(md) if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == "code\n"


def test_markdown_blocks_stream_complete_blocks_only() -> None:
    from gcite.stream.parser import CitationParser
    from gcite.stream.render import MarkdownBlocks

    answer = (
        "# 标题[C:1]\n\n第一段[C:1][C:2]。\n\n- 一\n- 二[C:2]\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    parser = CitationParser(known_ids=["1", "2"])
    blocks = MarkdownBlocks()
    out: list[str] = []
    longest = 0
    for ch in answer:
        out += blocks.feed(parser.feed(ch))
        longest = max(longest, len(blocks.open))
    out += blocks.feed(parser.close()) + blocks.close()
    assert out == [
        "# 标题¹\n",
        "第一段¹˒²。\n",
        "- 一\n- 二²\n",
        "| a | b |\n|---|---|\n| 1 | 2 |\n",
    ]
    assert longest <= len("| a | b |\n|---|---|\n| 1 | 2 |\n")  # completed blocks are dropped


def test_terminal_superscripts_and_control_characters() -> None:
    assert superscript(1234567890) == "¹²³⁴⁵⁶⁷⁸⁹⁰"
    segments = [{"text": "a\x1b[31m红\x07\r\n"}, {"cite": "9", "idx": 12}, {"text": "\tb"}]
    assert render_terminal(segments) == "a[31m红\n¹²\tb"  # type: ignore[arg-type]


def test_terminal_source_list() -> None:
    segments, panel = parsed()
    assert render_terminal(segments).startswith("巡更人员需要先在终端登录¹。")
    assert render_sources_terminal(panel).splitlines() == [
        "来源：",
        "1. [网页] 物业巡检流程标准 - 知乎 — 知乎 · 2025-08-12",
        "   https://www.zhihu.com/question/123",
        "2. [知识库] 物业管理制度 · 异常上报处理 — 测试知识库20260610",
        "3. [网页] 物业巡检分类 - 百度百科 — 百度百科 · 2025-09-01",
        "   https://baike.baidu.com/item/巡检",
    ]


def test_panel_model_dedupes_and_orders_by_index() -> None:
    panel = build_panel([("6", 3), ("7", 1), ("2", 2), ("7", 1)], {c["id"]: c for c in CHUNKS})
    assert [(e["idx"], e["raw_id"]) for e in panel] == [(1, "7"), (2, "2"), (3, "6")]
    assert panel[0]["chunk"] is CHUNKS[2]
    assert build_panel([("99", 1)], CHUNKS) == [{"idx": 1, "raw_id": "99", "chunk": None}]
    # malformed metadata items are skipped, not fatal
    assert build_panel([("1", 1)], [None, {"no_id": 1}, {"id": 1, "document_title": "t"}])[0][  # type: ignore[list-item]
        "chunk"
    ] == {"id": 1, "document_title": "t"}


def test_chunk_map_keeps_the_first_chunk_of_a_repeated_id() -> None:
    first, second = {"id": "1", "document_title": "甲"}, {"id": 1, "document_title": "乙"}
    assert build_panel([("1", 1)], [first, second])[0]["chunk"] is first
