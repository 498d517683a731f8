"""The contract corpus: small real documents (md/txt/html/pdf/docx) and their manifest.

:func:`write_mixed` writes one file of each supported format (plus broken, hidden and
unsupported ones) and :data:`MANIFEST` adds metadata and roles; ingested as
:data:`DATASET` they are the knowledge base the store contract
(:mod:`gcite.testing.store_contract`) searches. Needs python-docx (a gcite dependency),
not pytest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF (Helvetica, ASCII text) with a correct xref table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


def write_docx(path: Path, title: str, heading: str, paragraphs: list[str]) -> None:
    """A real .docx written with python-docx (core title, one heading, paragraphs)."""
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.add_heading(heading, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))


MARKDOWN = """---
document_title: 园区消防巡查制度
access_roles: [安保主管]
year: 2021
effective: 2021-04-29
department: 安保部
---
# 园区消防巡查制度

## 第一章 总则

第一条 为规范园区消防巡查，制定本制度。

第二条 安保主管每日组织一次防火巡查，巡查记录保存三年。
"""

TEXT = (
    "电梯维保规程\n\n电梯每十五日至少进行一次清洁、润滑、调整和检查。维保记录由运维工程师签字。\n"
)

HTML = """<html><head><title>停车场管理办法</title><style>p{}</style></head>
<body><h1>停车场管理办法</h1><p>地下停车场禁止存放易燃易爆物品。</p>
<h2>收费</h2><p>临时停车按小时计费，每日封顶。</p><script>var x = 1;</script></body></html>
"""


def write_mixed(root: Path) -> None:
    """One file of each supported format plus two broken ones and an ignored one."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "patrol.md").write_text(MARKDOWN, encoding="utf-8")
    (root / "elevator.txt").write_text(TEXT, encoding="utf-8")
    (root / "parking.html").write_text(HTML, encoding="utf-8")
    (root / "boiler.pdf").write_bytes(
        minimal_pdf("Boiler room inspection: pressure gauges are checked every week.")
    )
    write_docx(
        root / "water.docx",
        "二次供水管理规定",
        "二次供水",
        ["水箱每半年清洗消毒一次。", "水质检测报告应当公示。"],
    )
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    (root / "fake.docx").write_bytes(b"plain text pretending to be a docx")
    (root / "notes.xyz").write_text("ignored: unsupported suffix", encoding="utf-8")
    (root / ".hidden.md").write_text("# hidden\n\nskipped", encoding="utf-8")


DATASET = "园区制度库"
"""The dataset the contract corpus is ingested as (the manifest's ``dataset_name``)."""

MANIFEST: dict[str, Any] = {
    "dataset_name": DATASET,
    "documents": {
        "elevator.txt": {"document_title": "电梯维保规程", "access_roles": ["运维工程师"]},
        "parking.html": {"source_file_url": "https://kb.example.com/parking.html", "year": 2019},
        "water.docx": {"access_roles": None, "effective": "2023-06-01"},
    },
}


__all__ = ["DATASET", "MANIFEST", "minimal_pdf", "write_docx", "write_mixed"]
