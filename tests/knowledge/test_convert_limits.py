"""Hostile documents stay bounded: declared sizes are never trusted, every cap names its
setting (413), every parser error is one typed 422, and a refused upload leaves nothing.

Every file is real bytes (hand-built DOCX/XLSX/PDF parts, see ``hostile.py``) through the
real converter, which runs in a child process bounded by ``setrlimit``.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from gcite.config import Settings
from gcite.knowledge import ingest_paths
from gcite.knowledge.convert import ConversionError, convert_file
from gcite.knowledge.limits import MIB, ConvertLimits
from gcite.knowledge.manage import ManageError, create_dataset, list_documents, upsert_document
from gcite.knowledge.sandbox import ChildUsage, run_bounded
from gcite.knowledge.store import open_store

from .hostile import (
    LAUGHS_DTD,
    XXE_DTD,
    docx_bomb,
    docx_from_body,
    docx_table,
    inline,
    minimal_pdf_pages,
    paragraph,
    sheet,
    xlsx,
    xlsx_far_cell,
    xlsx_rows,
)


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _refused(path: Path, limits: ConvertLimits | None = None) -> ConversionError:
    with pytest.raises(ConversionError) as caught:
        convert_file(path, limits)
    return caught.value


def test_a_far_cell_does_not_make_the_declared_range_real(tmp_path: Path) -> None:
    # 1 KB declaring A1:XFD1048576 (17 billion cells): read by its two real cells
    data = xlsx_far_cell()
    assert len(data) < 5000
    text = convert_file(_write(tmp_path, "far.xlsx", data)).text
    assert text.startswith("## 表一\n\n| 标题 |")
    assert "远处的单元格" in text and len(text) < 200


def test_rows_beyond_a_small_declared_range_are_all_read(tmp_path: Path) -> None:
    text = convert_file(_write(tmp_path, "lie.xlsx", xlsx_rows(5000, dimension="A1:B1"))).text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 5000  # the first row is the header
    assert "| 5000 | 10000 |" in text


def test_a_million_rows_past_the_cell_cap_are_refused_not_cut(tmp_path: Path) -> None:
    path = _write(tmp_path, "million.xlsx", xlsx_rows(1_000_000, dimension="A1:B1"))
    error = _refused(path, ConvertLimits(max_cells=100_000))
    assert error.status == 413 and error.limit == "convert_max_cells"
    assert "convert_max_cells" in str(error) and "100000" in str(error)


def test_a_docx_zip_bomb_is_refused_while_it_inflates(tmp_path: Path) -> None:
    # 1.5 MB whose word/document.xml inflates to 1.5 GiB; the child may add 512 MiB at most
    path = _write(tmp_path, "bomb.docx", docx_bomb(1536 * MIB))
    assert path.stat().st_size < 2 * MIB
    error = _refused(path)
    assert error.status == 413 and error.limit == "convert_max_unzipped_bytes"
    assert "word/document.xml" in str(error)
    ratio = _refused(path, ConvertLimits(max_unzipped_bytes=4096 * MIB, max_zip_ratio=100))
    assert ratio.status == 413 and ratio.limit == "convert_max_zip_ratio"


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("laughs.docx", docx_from_body(paragraph("&lol9;"), prolog=LAUGHS_DTD)),
        (
            "laughs.xlsx",
            xlsx(sheet("A1", f'<row r="1">{inline("A1", "&lol9;")}</row>', prolog=LAUGHS_DTD)),
        ),
        (
            "xxe.xlsx",
            xlsx(sheet("A1", f'<row r="1">{inline("A1", "&xxe;")}</row>', prolog=XXE_DTD)),
        ),
        ("broken.docx", docx_from_body("<w:p><w:r><w:t>正文</w:r></w:p>")),
        ("deep.docx", docx_from_body("<w:p>" + "<w:r>" * 5000 + "</w:r>" * 5000 + "</w:p>")),
        ("truncated.docx", docx_table(20, 5)[:-200]),
        ("truncated.pdf", minimal_pdf_pages(3)[:300]),
    ],
)
def test_every_parser_error_is_one_typed_422(tmp_path: Path, name: str, data: bytes) -> None:
    error = _refused(_write(tmp_path, name, data))
    assert type(error) is ConversionError and error.status == 422 and error.limit is None
    assert str(error) and "Traceback" not in str(error)


def test_an_external_entity_is_never_read(tmp_path: Path) -> None:
    secret = Path("/etc/hostname").read_text(encoding="utf-8").strip()
    data = docx_from_body(paragraph("甲&xxe;乙"), prolog=XXE_DTD)
    try:
        text = convert_file(_write(tmp_path, "xxe.docx", data)).text
    except ConversionError as error:
        assert error.status == 422
        return
    assert "甲" in text and secret not in text


def test_pdf_pages_and_objects_are_capped(tmp_path: Path) -> None:
    path = _write(tmp_path, "pages.pdf", minimal_pdf_pages(30))
    assert "page 29" in convert_file(path).text
    pages = _refused(path, ConvertLimits(max_pdf_pages=10))
    assert pages.status == 413 and pages.limit == "convert_max_pdf_pages"
    objects = _refused(path, ConvertLimits(max_pdf_objects=20))
    assert objects.status == 413 and objects.limit == "convert_max_pdf_objects"


def test_a_table_of_ten_thousand_by_a_hundred_converts_whole(tmp_path: Path) -> None:
    # 1,000,000 cells: streamed row by row (python-docx's row.cells rebuilt the whole
    # grid for every row: 221 s of CPU and counting); inside the default budgets
    text = convert_file(_write(tmp_path, "big.docx", docx_table(10_000, 100))).text
    assert text.count("\n| r") == 10_000 and "| r9999c0 |" in text
    refused = _refused(tmp_path / "big.docx", ConvertLimits(max_cells=300_000))
    assert refused.status == 413 and refused.limit == "convert_max_cells"


def sleep_forever() -> None:
    while True:
        time.sleep(1)


def spin_forever() -> None:
    while True:
        pass


def allocate(mib: int) -> int:
    return len(b"\x01" * (mib * MIB))  # every page touched


def own_limits() -> tuple[int, int]:
    return resource.getrlimit(resource.RLIMIT_AS)[0], resource.getrlimit(resource.RLIMIT_CPU)[0]


def test_the_child_is_bounded_in_time_cpu_and_memory() -> None:
    limits = ConvertLimits(timeout_s=1.0, cpu_s=60.0, memory_mb=64)
    with pytest.raises(ConversionError) as late:
        run_bounded(sleep_forever, (), limits)
    assert late.value.status == 413 and late.value.limit == "convert_timeout_s"
    with pytest.raises(ConversionError) as busy:
        run_bounded(spin_forever, (), ConvertLimits(timeout_s=600.0, cpu_s=1.0))
    assert busy.value.status == 413 and busy.value.limit == "convert_cpu_s"
    with pytest.raises(ConversionError) as big:
        run_bounded(allocate, (1024,), ConvertLimits(memory_mb=64))
    assert big.value.status == 413 and big.value.limit == "convert_memory_mb"
    usages: list[ChildUsage] = []
    assert run_bounded(allocate, (16,), ConvertLimits(memory_mb=64), on_usage=usages.append)
    [usage] = usages  # measured in the child: it grew by the allocation, within its cap
    assert 15 * MIB <= usage.peak_rss - usage.idle_rss < 64 * MIB
    address_space, cpu = run_bounded(own_limits, (), ConvertLimits(memory_mb=64, cpu_s=30))
    assert 0 < address_space < 4096 * MIB and 0 < cpu <= 60
    assert resource.getrlimit(resource.RLIMIT_AS)[0] != address_space  # the caller: unlimited


def test_a_refused_upload_leaves_nothing_behind(tmp_path: Path) -> None:
    settings = Settings.from_keys(data_dir=tmp_path / "data", embed_backend="use")
    store = open_store(settings, create=True)
    try:
        create_dataset(store, "手册")
        for name, data, status in [
            ("laughs.docx", docx_from_body(paragraph("&lol9;"), prolog=LAUGHS_DTD), 422),
            ("bomb.docx", docx_bomb(64 * MIB), 413),
            ("cut.xlsx", xlsx_rows(50)[:-300], 422),
        ]:
            store.settings.convert_max_unzipped_bytes = 16 * MIB
            with pytest.raises(ManageError) as refused:
                upsert_document(store, "手册", name=name, data=data)
            assert refused.value.status == status, str(refused.value)
            assert list_documents(store, "手册") == []
        uploads = tmp_path / "data" / "uploads"
        assert [p for p in uploads.rglob("*") if p.is_file()] == []
        # a refused update keeps the previous version and its files
        good = docx_from_body(paragraph("旧版本正文"))
        first = upsert_document(store, "手册", name="rules.docx", data=good)
        with pytest.raises(ManageError) as refused:
            upsert_document(store, "手册", name="rules.docx", data=docx_bomb(64 * MIB))
        assert refused.value.status == 413
        [kept] = list_documents(store, "手册")
        assert kept.id == first.document.id and kept.segments == first.document.segments
        assert Path(kept.path).read_bytes() == good
    finally:
        store.close()


def test_ingest_reports_refused_files_with_their_limit(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "far.xlsx").write_bytes(xlsx_far_cell())
    (docs / "bomb.docx").write_bytes(docx_bomb(64 * MIB))
    (docs / "ok.md").write_text("# 正常\n\n正文。\n", encoding="utf-8")
    settings = Settings.from_keys(
        data_dir=tmp_path / "data", embed_backend="use", convert_max_unzipped_bytes=16 * MIB
    )
    report = ingest_paths([docs], settings=settings, dataset="d")
    assert report.added == 2 and report.failed_status == 413
    assert [(p.name, "convert_max_unzipped_bytes" in r) for p, r in report.failed] == [
        ("bomb.docx", True)
    ]
