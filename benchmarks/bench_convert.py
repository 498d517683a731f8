"""Converting and ingesting large documents within the conversion limits.

Run on demand (never in CI)::

    .venv/bin/python benchmarks/bench_convert.py [--rows 10000] [--cols 100] [--pages 10000]
        [--embedder standin|use]

Three generated files: a DOCX with one ``rows`` x ``cols`` table, an XLSX sheet of the
same size, and a PDF of ``pages`` pages (one line of text each). For each:

* ``convert``: the bounded conversion (:func:`gcite.knowledge.sandbox.run_bounded`, the
  child process ``convert_file`` uses) with the default limits: wall seconds, the child's
  CPU seconds, its resident memory growth (peak minus its size when forked) next to
  ``convert_memory_mb``, and the characters of text produced;
* ``ingest``: ``ingest_paths`` of the file into a fresh embedded store (conversion,
  chunking, embedding, BM25, Qdrant Edge writes): wall seconds and the ingesting
  process's own peak RSS growth (``ru_maxrss``; the converting child is measured above).

``--embedder standin`` (the default) embeds through the local OpenAI-compatible stand-in
(``tests/knowledge/embed_standin.py``, hashed vectors), so the ingest figures are gcite's
own costs; ``use`` puts the bundled model in. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import io
import resource
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def docx_table(rows: int, cols: int) -> bytes:
    """A DOCX: a heading paragraph and one table of short distinct cells."""
    cell = "<w:tc><w:p><w:r><w:t>{}</w:t></w:r></w:p></w:tc>"
    body = "".join(
        "<w:tr>" + "".join(cell.format(f"r{r}c{c}") for c in range(cols)) + "</w:tr>"
        for r in range(rows)
    )
    document = (
        f'<?xml version="1.0"?><w:document xmlns:w="{W_NS}"><w:body>'
        f"<w:p><w:r><w:t>大表</w:t></w:r></w:p><w:tbl>{body}</w:tbl></w:body></w:document>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/'
            '2006/content-types"><Default Extension="xml" ContentType="application/xml"/>'
            "</Types>",
        )
        archive.writestr("word/document.xml", document)
    return out.getvalue()


def xlsx_table(rows: int, cols: int, path: Path) -> None:
    """An XLSX written by openpyxl (write-only mode): one sheet, ``rows`` x ``cols``."""
    import openpyxl

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("大表")
    for r in range(rows):
        sheet.append([f"r{r}c{c}" for c in range(cols)])
    book.save(str(path))


def pdf_pages(pages: int) -> bytes:
    """A PDF of ``pages`` pages, one line of text each (correct xref)."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for number in range(pages):
        stream = f"BT /F1 12 Tf 72 720 Td (page {number} of the benchmark) Tj ET".encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
            b"<< /F1 3 0 R >> >> /Contents %d 0 R >>" % len(objects)
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {pages} >>".encode()
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n".encode()
    return bytes(out + f"startxref\n{xref}\n%%EOF\n".encode())


def measure(path: Path, settings: Any) -> dict[str, Any]:
    from gcite.knowledge import convert, ingest_paths
    from gcite.knowledge.limits import ConvertLimits
    from gcite.knowledge.sandbox import ChildUsage, run_bounded

    limits = ConvertLimits.from_settings(settings)
    usages: list[ChildUsage] = []
    start = time.perf_counter()
    text, _, _ = run_bounded(
        convert._convert_bounded, (str(path), limits), limits, on_usage=usages.append
    )
    convert_s = time.perf_counter() - start
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    report = ingest_paths([path], settings=settings, dataset=path.stem)
    ingest_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert not report.failed, report.failed
    return {
        "file": path.name,
        "bytes": path.stat().st_size,
        "convert_s": convert_s,
        "child_cpu_s": usages[0].cpu_s,
        "child_growth_mib": (usages[0].peak_rss - usages[0].idle_rss) / 2**20,
        "chars": len(text),
        "ingest_s": ingest_s,
        "chunks": report.chunks,
        "ingest_growth_mib": (after - before) / 1024,
    }


def small_overhead(folder: Path, rounds: int = 20) -> tuple[float, float]:
    """Median seconds to convert a small DOCX in the bounded child, and in-process."""
    import statistics

    from gcite.knowledge import convert

    path = folder / "small.docx"
    path.write_bytes(docx_table(5, 4))
    convert.convert_file(path)  # the fork server starts once per process
    bounded, direct = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        convert.convert_file(path)
        bounded.append(time.perf_counter() - start)
        start = time.perf_counter()
        convert._convert_bounded(str(path), convert.ConvertLimits())
        direct.append(time.perf_counter() - start)
    return statistics.median(bounded), statistics.median(direct)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--cols", type=int, default=100)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--embedder", default="standin", choices=["standin", "use"])
    args = parser.parse_args()
    from gcite.config import Settings

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "table.docx").write_bytes(docx_table(args.rows, args.cols))
        xlsx_table(args.rows, args.cols, folder / "table.xlsx")
        (folder / "pages.pdf").write_bytes(pdf_pages(args.pages))
        extra: dict[str, Any] = {}
        standin: Any = None
        if args.embedder == "standin":
            sys.path.insert(0, str(REPO / "tests" / "knowledge"))
            from embed_standin import EmbeddingStandin

            standin = EmbeddingStandin().__enter__()
            extra = {
                "embed_backend": "openai",
                "embed_base_url": standin.base_url,
                "embed_model": "standin",
                "embed_api_key": "x",
            }
        settings = Settings.from_keys(data_dir=folder / "data", **extra)
        small = small_overhead(folder)
        rows = [
            measure(folder / name, settings) for name in ("table.docx", "table.xlsx", "pages.pdf")
        ]
        if standin is not None:
            standin.__exit__(None, None, None)
    print(
        f"limits: convert_max_cells {settings.convert.max_cells}, convert_max_unzipped_bytes "
        f"{settings.convert.max_unzipped_bytes}, convert_max_pdf_pages "
        f"{settings.convert.max_pdf_pages}, convert_timeout_s {settings.convert.timeout_s}, "
        f"convert_cpu_s {settings.convert.cpu_s}, convert_memory_mb {settings.convert.memory_mb}"
    )
    print(
        f"small DOCX (5 x 4 table), median of 20: bounded child {small[0] * 1000:.1f} ms, "
        f"in-process {small[1] * 1000:.1f} ms, ratio {small[0] / small[1]:.1f}x"
    )
    print(
        "| file | size | convert wall s | child CPU s | child RSS growth MiB | text chars "
        "| ingest wall s | chunks | ingest process RSS growth MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['file']} | {r['bytes'] / 2**20:.1f} MiB | {r['convert_s']:.1f} "
            f"| {r['child_cpu_s']:.1f} | {r['child_growth_mib']:.0f} | {r['chars']:,} "
            f"| {r['ingest_s']:.1f} | {r['chunks']:,} | {r['ingest_growth_mib']:.0f} |"
        )


if __name__ == "__main__":
    main()
