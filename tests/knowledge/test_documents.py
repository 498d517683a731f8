"""Documents as they really are (issue 14 item 3): tables, PDF line breaks, codes, titles,
spreadsheets, skipped files. Every case builds a real file (python-docx, openpyxl,
reportlab for PDFs, plain HTML/CSV/Markdown) and goes through the real converter, chunker
and, where it matters for retrieval, a real store (Qdrant Edge, `use` embedder).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from gcite.config import Settings
from gcite.knowledge import ingest_paths, open_store
from gcite.knowledge.chunking import MAX_CRUMB_CHARS, chunk_text, iter_chunks
from gcite.knowledge.convert import convert_file, join_pdf_lines, markdown_table
from gcite.knowledge.ingest import MAX_TITLE_CHARS

HEADER = "| 车型 | 首小时 | 之后每小时 |"


def write_pdf(path: Path, paragraphs: list[str], table: list[list[str]] | None = None) -> None:
    """A real PDF written by reportlab: CJK paragraphs wrapped by the layout engine (so line
    breaks fall inside sentences) and, optionally, a ruled table."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    style = ParagraphStyle("cn", fontName="STSong-Light", fontSize=11, leading=16, wordWrap="CJK")
    story: list[Any] = []
    for text in paragraphs:
        story += [Paragraph(text, style), Spacer(1, 12)]
    if table:
        grid = TableStyle(
            [("FONTNAME", (0, 0), (-1, -1), "STSong-Light"), ("GRID", (0, 0), (-1, -1), 0.5, 0)]
        )
        story.append(Table(table, style=grid))
    SimpleDocTemplate(str(path), pagesize=A4).build(story)


PARKING = (
    "地下停车场对外来车辆实行计时收费：首小时10元，之后每小时5元，当日封顶60元；"
    "月卡用户凭卡进出，不另收费。夜间22点以后进场的车辆按夜间标准收费，每晚20元，"
    "次日8点前离场有效。"
)


def test_pdf_line_breaks_inside_sentences_are_joined(tmp_path: Path) -> None:
    pdf = tmp_path / "parking.pdf"
    write_pdf(pdf, [PARKING * 2, "以上标准自2026年1月1日起执行。"])
    from pypdf import PdfReader

    raw = "".join(page.extract_text() for page in PdfReader(str(pdf)).pages)
    assert "\n" in raw.split("以上")[0].strip()  # the layout did break the paragraph
    text = convert_file(pdf).text
    assert PARKING * 2 in text  # one line again, nothing lost
    chunks = chunk_text(text, chunk_size=120, chunk_overlap=0)
    assert any("首小时10元，之后每小时5元，当日封顶60元；" in c.text for c in chunks)


def test_join_pdf_lines_keeps_paragraphs_items_and_latin_spaces() -> None:
    text = (
        "第一条 物业服务\n企业应当公示收费标准。\n第二条 业主\n\n一、总则\n1. 巡查\n"
        "要点如下：\nfire safety\nrules apply."
    )
    joined = join_pdf_lines(text)
    assert joined.split("\n") == [
        "第一条 物业服务企业应当公示收费标准。",
        "第二条 业主",
        "",
        "一、总则",
        "1. 巡查要点如下：",
        "fire safety rules apply.",
    ]


def test_pdf_tables_become_markdown_tables_in_place(tmp_path: Path) -> None:
    pdf = tmp_path / "fees.pdf"
    rows = [["车型", "首小时", "之后每小时"], ["小型车", "10元", "5元"], ["大型车", "20元", "10元"]]
    write_pdf(pdf, ["收费标准如下表。"], rows)
    text = convert_file(pdf).text
    assert (
        f"{HEADER}\n| --- | --- | --- |\n| 小型车 | 10元 | 5元 |\n| 大型车 | 20元 | 10元 |" in text
    )
    assert text.index("收费标准如下表") < text.index(HEADER)


def test_docx_tables_are_kept_with_their_header_in_document_order(tmp_path: Path) -> None:
    import docx

    path = tmp_path / "fees.docx"
    document = docx.Document()
    document.add_heading("停车收费", level=1)
    document.add_paragraph("收费标准如下：")
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate(
        [
            ["车型", "首小时", "之后每小时"],
            ["小型车", "10元", "5元"],
            ["大型车", "20元", "10元|夜间"],
        ]
    ):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_paragraph("月卡另行办理。")
    document.save(str(path))
    text = convert_file(path).text
    assert f"{HEADER}\n| --- | --- | --- |\n| 小型车 | 10元 | 5元 |" in text
    assert "| 大型车 | 20元 | 10元\\|夜间 |" in text  # a | inside a cell is escaped
    assert text.index("收费标准如下") < text.index(HEADER) < text.index("月卡另行办理")


def test_html_tables_keep_their_header(tmp_path: Path) -> None:
    path = tmp_path / "fees.html"
    path.write_text(
        "<html><body><h1>收费</h1><p>标准：</p><table><thead><tr><th>车型</th><th>首小时</th>"
        "<th>之后每小时</th></tr></thead><tbody><tr><td>小型车</td><td>10元</td><td>5元</td>"
        "</tr><tr><td><p>大型车</p></td><td>20元</td><td>10元</td></tr></tbody></table>"
        "<p>完</p></body></html>",
        encoding="utf-8",
    )
    text = convert_file(path).text
    assert (
        f"{HEADER}\n| --- | --- | --- |\n| 小型车 | 10元 | 5元 |\n| 大型车 | 20元 | 10元 |" in text
    )
    assert "\n大型车\n" not in text  # not one cell per line any more


def test_a_long_table_is_split_by_rows_with_the_header_repeated() -> None:
    rows = [["设备编号", "名称", "位置"]] + [
        [f"EQ-{i:06d}", f"水泵{i}号", f"B{i % 3}层"] for i in range(60)
    ]
    text = "# 设备台账\n\n" + markdown_table(rows)
    chunks = chunk_text(text, chunk_size=200, chunk_overlap=40)
    assert len(chunks) > 3
    for chunk in chunks:
        lines = chunk.text.split("\n")
        assert lines[:3] == ["设备台账", "| 设备编号 | 名称 | 位置 |", "| --- | --- | --- |"]
        assert len(chunk.text) <= 200 + len("设备台账\n")
    body_rows = [line for c in chunks for line in c.text.split("\n")[3:]]
    assert len(body_rows) == 60 and len(set(body_rows)) == 60  # each row once, none lost


def test_xlsx_and_csv_are_ingested_as_tables(tmp_path: Path) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "电梯"
    for row in [["编号", "品牌", "年检日期"], ["EL-01", "三菱", None], ["EL-02", "奥的斯", 2026]]:
        sheet.append(row)
    book.create_sheet("空表")
    book.save(str(tmp_path / "lifts.xlsx"))
    xlsx = convert_file(tmp_path / "lifts.xlsx").text
    assert xlsx.startswith("## 电梯\n\n| 编号 | 品牌 | 年检日期 |\n| --- | --- | --- |")
    assert "| EL-01 | 三菱 |  |" in xlsx and "| EL-02 | 奥的斯 | 2026 |" in xlsx
    assert "空表" not in xlsx
    (tmp_path / "keys.csv").write_text("钥匙,位置\n备用钥匙,三号保险柜\n", encoding="utf-8")
    assert convert_file(tmp_path / "keys.csv").text == (
        "| 钥匙 | 位置 |\n| --- | --- |\n| 备用钥匙 | 三号保险柜 |"
    )


def test_broken_spreadsheets_fail_with_a_reason(tmp_path: Path) -> None:
    (tmp_path / "bad.xlsx").write_bytes(b"not a zip")
    (tmp_path / "ok.md").write_text("# 正常\n\n正文。\n", encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    report = ingest_paths([tmp_path], settings=settings, dataset="d")
    assert [(p.name, "XLSX" in r) for p, r in report.failed] == [("bad.xlsx", True)]
    assert report.added == 1


def test_skipped_files_are_listed_with_the_reason(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / ".git").mkdir(parents=True)
    (docs / ".git" / "config").write_text("x", encoding="utf-8")
    (docs / "a.md").write_text("# 甲\n\n正文。\n", encoding="utf-8")
    (docs / "photo.jpg").write_bytes(b"\xff\xd8")
    (docs / "Makefile").write_text("all:", encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    report = ingest_paths([docs], settings=settings, dataset="d")
    skipped = {p.name: reason for p, reason in report.skipped}
    assert skipped == {
        ".git": "隐藏文件或目录",
        "photo.jpg": "不支持的文件类型: .jpg",
        "Makefile": "不支持的文件类型: (无扩展名)",
    }
    assert report.added == 1 and not report.failed


def test_exact_codes_are_found_first(tmp_path: Path) -> None:
    docs = tmp_path / "codes"
    docs.mkdir()
    lines = [
        f"设备 EQ-{n:06d} 是{k}号楼的排风机，每季度保养一次。"
        for k, n in zip(range(1, 40), itertools.count(4300, 1), strict=False)
    ]
    lines.append("设备 EQ-000123 是地下车库的排水泵，每月检查一次浮球开关。")
    (docs / "equipment.md").write_text("# 设备台账\n\n" + "\n\n".join(lines), encoding="utf-8")
    settings = Settings.from_keys(
        data_dir=tmp_path / "data", embed_backend="use", chunk_size=60, chunk_overlap=0
    )
    ingest_paths([docs], settings=settings, dataset="d")
    with open_store(settings) as store:
        top = store.search("EQ-000123 是什么设备？", top_k=3, score_threshold=0.0)
    assert "EQ-000123" in top[0]["content"]


def test_tables_pdfs_and_spreadsheets_are_found_whole_through_the_store(tmp_path: Path) -> None:
    """Real DOCX, HTML, PDF, XLSX and CSV files ingested into a real store (Qdrant Edge,
    `use`): a question about one table row finds a chunk holding that row under its header,
    and a PDF sentence broken by the layout is found whole."""
    import docx
    import openpyxl

    docs = tmp_path / "docs"
    docs.mkdir()
    document = docx.Document()
    document.add_heading("保洁排班", level=1)
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate(
        [["区域", "班次", "负责人"], ["大堂", "早班", "张伟"], ["地下车库", "夜班", "李强"]]
    ):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.save(str(docs / "cleaning.docx"))
    (docs / "rooms.html").write_text(
        "<h1>会议室收费</h1><table><tr><th>会议室</th><th>容纳人数</th><th>每小时费用</th></tr>"
        "<tr><td>小会议室</td><td>8人</td><td>100元</td></tr>"
        "<tr><td>大会议室</td><td>40人</td><td>400元</td></tr></table>",
        encoding="utf-8",
    )
    write_pdf(
        docs / "parking.pdf",
        [PARKING * 2],
        [["车位", "月租"], ["地面", "300元"], ["地下", "500元"]],
    )
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "电梯"
    for row in [["编号", "品牌", "年检月份"], ["EL-01", "三菱", "3月"], ["EL-02", "奥的斯", "9月"]]:
        sheet.append(row)
    book.save(str(docs / "lifts.xlsx"))
    (docs / "keys.csv").write_text("钥匙,保管位置\n备用钥匙,三号保险柜\n", encoding="utf-8")
    settings = Settings.from_keys(
        data_dir=tmp_path / "data", embed_backend="use", chunk_size=120, chunk_overlap=0
    )
    report = ingest_paths([docs], settings=settings, dataset="d")
    assert report.added == 5 and not report.failed and not report.skipped
    expected = {
        "地下车库夜班保洁由谁负责？": (
            "cleaning.docx",
            ["| 区域 | 班次 | 负责人 |", "| 地下车库 | 夜班 | 李强 |"],
        ),
        "大会议室每小时费用多少？": (
            "rooms.html",
            ["| 会议室 | 容纳人数 | 每小时费用 |", "| 大会议室 | 40人 | 400元 |"],
        ),
        "地下车位月租多少钱？": ("parking.pdf", ["| 车位 | 月租 |", "| 地下 | 500元 |"]),
        "停车首小时之后每小时收费多少？": (
            "parking.pdf",
            ["首小时10元，之后每小时5元，当日封顶60元；"],
        ),
        "EL-02 电梯是什么品牌？": (
            "lifts.xlsx",
            ["| 编号 | 品牌 | 年检月份 |", "| EL-02 | 奥的斯 | 9月 |"],
        ),
        "备用钥匙放在哪里？": ("keys.csv", ["| 钥匙 | 保管位置 |", "| 备用钥匙 | 三号保险柜 |"]),
    }
    with open_store(settings) as store:
        for question, (name, parts) in expected.items():
            top = store.search(question, top_k=3, score_threshold=0.0)
            found = [i for i in top if i["title"] == name and all(p in i["content"] for p in parts)]
            assert found, (question, [(i["title"], i["content"]) for i in top])
            assert top[0]["title"] == name, (question, top[0])


def test_the_document_title_is_bounded_in_the_indexed_text(tmp_path: Path) -> None:
    docs = tmp_path / "t"
    docs.mkdir()
    title = "很长的标题" * 10_000  # 50,000 characters
    (docs / "long.md").write_text(f"# {title}\n\n## 规定\n\n访客须登记。\n", encoding="utf-8")
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    report = ingest_paths([docs], settings=settings, dataset="d")
    assert report.chunks == 1
    with open_store(settings) as store:
        hit = store.hits("访客登记", top_k=1, score_threshold=0.0)[0]
    assert hit.payload["doc_metadata"]["document_title"] == title  # metadata kept whole
    assert len(hit.payload["content"].split("\n")[0]) <= MAX_CRUMB_CHARS
    assert MAX_TITLE_CHARS <= 100


def test_the_chunker_streams_with_bounded_state() -> None:
    consumed = 0

    def lines() -> Any:
        nonlocal consumed
        for i in itertools.count():
            consumed += 1
            yield f"第{i}句没有换段的长文本，内容一直写下去。"

    stream = iter_chunks(lines(), chunk_size=300, chunk_overlap=30)
    first = [next(stream) for _ in range(50)]
    assert consumed < 2_000  # chunks came out long before the (endless) input ended
    assert all(len(c.text) <= 300 for c in first)
    assert [c.position for c in first] == list(range(1, 51))


def test_one_line_without_breaks_is_read_in_pieces(tmp_path: Path) -> None:
    from gcite.knowledge.convert import READ_BLOCK, iter_text_lines, scan_text

    path = tmp_path / "oneline.txt"
    path.write_text("物业巡查记录。" * (READ_BLOCK // 7), encoding="utf-8")  # ~3 MiB, one line
    scan = scan_text(path)
    pieces = list(iter_text_lines(path, scan))
    assert len(pieces) > 2 and sum(used for _, used in pieces) == path.stat().st_size
    assert max(len(line.encode()) for line, _ in pieces) <= READ_BLOCK


@pytest.mark.parametrize("encoding", ["utf-8", "gb18030"])
def test_streamed_text_keeps_front_matter_title_and_encoding(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "a.md"
    path.write_bytes("---\nyear: 2021\n---\n# 巡查制度\n\n每日巡查。\n".encode(encoding))
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    report = ingest_paths([path], settings=settings, dataset="d")
    assert report.added == 1
    with open_store(settings) as store:
        hit = store.hits("每日巡查", top_k=1, score_threshold=0.0)[0]
    assert hit.payload["doc_metadata"]["year"] == 2021
    assert hit.payload["doc_metadata"]["document_title"] == "巡查制度"
    assert hit.payload["content"] == "巡查制度\n每日巡查。"


def _measure_ingests(sizes: tuple[int, ...], *extra: str) -> list[dict[str, Any]]:
    """Run ``ingest_memory.py`` for each size in its own process (concurrently), the
    embedding stand-in serving them from this process."""
    import json
    import subprocess
    import sys

    from .embed_standin import EmbeddingStandin

    script = Path(__file__).with_name("ingest_memory.py")
    with EmbeddingStandin() as server:
        runs = [
            subprocess.Popen(
                [sys.executable, str(script), str(size), server.base_url, *extra],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for size in sizes
        ]
        results = []
        for run in runs:
            out, err = run.communicate(timeout=300)
            assert run.returncode == 0, err[-3000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_large_files_stream_with_memory_independent_of_size() -> None:
    """150,000 and 600,000 characters of text (4x), each ingested in a fresh process after a
    warm-up (see ``ingest_memory.py``), with the production batch sizes: the small file
    already needs two store writes, so both runs hold at most one batch in flight.

    * the peak RSS of the larger run is within 1.3x of the smaller one;
    * the peak RSS above the level before the ingest - the pipeline's working memory plus
      what the store keeps for the new points (Qdrant Edge's vectors and sparse index live
      in memory, about 6 KiB per chunk) - grows less than 2x for 4x the text. Measured:
      1.6x; the round-1 whole-file pipeline (``--whole-file``: text read whole, every chunk
      embedded and written at once) 2.7x, so this fails on it;
    * the store is written as the chunks come, in writes of at most WRITE_BATCH + EMBED_BATCH
      points.
    """
    from gcite.knowledge.ingest import EMBED_BATCH, WRITE_BATCH

    small, big = _measure_ingests((150_000, 600_000))
    assert 3.5 < big["chunks"] / small["chunks"] < 4.5
    assert small["chunks"] > WRITE_BATCH  # the small file is not one write already
    assert big["peak"] <= 1.3 * small["peak"], (small, big)
    growth = [(r["peak"] - r["before"]) / 2**20 for r in (small, big)]
    assert growth[1] < 2 * growth[0], growth
    for run in (small, big):
        assert sum(run["writes"]) == run["chunks"]
        assert max(run["writes"]) <= WRITE_BATCH + EMBED_BATCH
        assert len(run["writes"]) >= run["chunks"] // (WRITE_BATCH + EMBED_BATCH)


def test_large_file_progress_moves_by_bytes_and_chunks() -> None:
    """The progress bar of a 200,000-character file counts the file's bytes and the chunks
    written: it moves through many intermediate values (round 1 sat at "0/1" to the end)."""
    (run,) = _measure_ingests((200_000,))
    progress = run["progress"]
    total = progress[0][1]
    assert total is not None and total > 500_000  # bytes of UTF-8 Chinese text, not "1"
    assert all(t == total for _, t, _ in progress)
    completed = [c for c, _, _ in progress]
    chunks = [n for _, _, n in progress]
    assert completed == sorted(completed) and chunks == sorted(chunks)
    assert completed[-1] == total and chunks[-1] == run["chunks"]
    assert len({c for c in completed if 0 < c < total}) >= run["chunks"] // 32 - 1
    assert len({n for n in chunks if 0 < n < run["chunks"]}) >= run["chunks"] // 32 - 1
