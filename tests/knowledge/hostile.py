"""Builders of hostile office files: zip bombs, declared-size lies, billion laughs, XXE,
deep nesting, huge tables, broken XML and truncated archives (real DOCX/XLSX/PDF bytes).

Every builder returns the file's bytes; :func:`generate` yields many variants with
names, for the fuzz-style tests.
"""

from __future__ import annotations

import io
import random
import zipfile
from collections.abc import Iterator

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
CONTENT_TYPES_DOCX = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
    'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
    'officedocument.wordprocessingml.document.main+xml"/></Types>'
)
RELS_DOCX = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships/officeDocument" Target="word/document.xml"/></Relationships>'
)
LAUGHS_DTD = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n<!ENTITY lol "lol">\n'
    + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n'
        for i in range(1, 10)
    )
    + "]>\n"
)
XXE_DTD = '<?xml version="1.0"?>\n<!DOCTYPE d [<!ENTITY xxe SYSTEM "file:///etc/hostname">]>\n'


def _zip(members: dict[str, bytes | str], *, level: int = 6) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def docx_from_body(body: str, *, prolog: str = '<?xml version="1.0"?>\n') -> bytes:
    """A DOCX whose ``word/document.xml`` has ``body`` inside ``<w:body>``."""
    document = f'{prolog}<w:document xmlns:w="{W_NS}"><w:body>{body}</w:body></w:document>'
    return _zip(
        {
            "[Content_Types].xml": CONTENT_TYPES_DOCX,
            "_rels/.rels": RELS_DOCX,
            "word/document.xml": document,
        }
    )


def paragraph(text: str) -> str:
    """One ``w:p`` with ``text``."""
    return f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"


def docx_table(rows: int, columns: int) -> bytes:
    """A DOCX with one heading paragraph and a ``rows`` x ``columns`` table (short cells)."""
    cell = "<w:tc><w:p><w:r><w:t>{}</w:t></w:r></w:p></w:tc>"
    lines = [
        "<w:tr>" + "".join(cell.format(f"r{r}c{c}") for c in range(columns)) + "</w:tr>"
        for r in range(rows)
    ]
    return docx_from_body(paragraph("大表") + "<w:tbl>" + "".join(lines) + "</w:tbl>")


def docx_bomb(inflated: int) -> bytes:
    """A DOCX whose ``word/document.xml`` inflates to about ``inflated`` bytes."""
    head = f'<?xml version="1.0"?><w:document xmlns:w="{W_NS}"><w:body><w:p><w:r><w:t>'
    tail = "</w:t></w:r></w:p></w:body></w:document>"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", CONTENT_TYPES_DOCX)
        archive.writestr("_rels/.rels", RELS_DOCX)
        info = zipfile.ZipInfo("word/document.xml")
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as member:
            member.write(head.encode())
            block = b"a" * (1 << 22)
            left = inflated
            while left > 0:
                member.write(block[: min(left, len(block))])
                left -= len(block)
            member.write(tail.encode())
    return out.getvalue()


def xlsx(sheet_xml: str, *, shared: str | None = None) -> bytes:
    """An XLSX with one sheet whose ``xl/worksheets/sheet1.xml`` is ``sheet_xml``."""
    members: dict[str, bytes | str] = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.'
            'openxmlformats.org/package/2006/content-types"><Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/><Override '
            'PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/'
            'worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.spreadsheetml.worksheet+xml"/></Types>'
        ),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
            'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" '
            'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            'officeDocument" Target="xl/workbook.xml"/></Relationships>'
        ),
        "xl/workbook.xml": (
            '<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.'
            'openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.'
            'openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet '
            'name="表一" sheetId="1" r:id="rId1"/></sheets></workbook>'
        ),
        "xl/_rels/workbook.xml.rels": (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
            'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" '
            'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            'worksheet" Target="worksheets/sheet1.xml"/></Relationships>'
        ),
        "xl/worksheets/sheet1.xml": sheet_xml,
    }
    if shared is not None:
        members["xl/sharedStrings.xml"] = shared
    return _zip(members, level=1)


SHEET_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats'
    '.org/spreadsheetml/2006/main">'
)


def sheet(dimension: str, rows: str, *, prolog: str = "") -> str:
    """A worksheet part declaring ``dimension`` with ``rows`` (``<row>`` elements)."""
    head = SHEET_HEAD if not prolog else prolog + SHEET_HEAD.split("?>", 1)[1]
    return f'{head}<dimension ref="{dimension}"/><sheetData>{rows}</sheetData></worksheet>'


def inline(ref: str, text: str) -> str:
    """One inline-string cell."""
    return f'<c r="{ref}" t="inlineStr"><is><t>{text}</t></is></c>'


def xlsx_far_cell() -> bytes:
    """The declared range ``A1:XFD1048576`` with one cell far away (about 1 KB)."""
    rows = f'<row r="1">{inline("A1", "标题")}</row><row r="1048576">'
    rows += inline("XFD1048576", "远处的单元格") + "</row>"
    return xlsx(sheet("A1:XFD1048576", rows))


def xlsx_rows(count: int, *, dimension: str = "A1:B1") -> bytes:
    """``count`` rows of two numeric cells while the sheet declares ``dimension``."""
    rows = "".join(
        f'<row r="{i}"><c r="A{i}"><v>{i}</v></c><c r="B{i}"><v>{i * 2}</v></c></row>'
        for i in range(1, count + 1)
    )
    return xlsx(sheet(dimension, rows))


def minimal_pdf_pages(pages: int) -> bytes:
    """A PDF of ``pages`` pages, each with one line of text (correct xref)."""
    font = 3
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, filled below
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for number in range(pages):
        stream = f"BT /F1 12 Tf 72 720 Td (page {number}) Tj ET".encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        content = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
            b"<< /F1 %d 0 R >> >> /Contents %d 0 R >>" % (font, content)
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
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def generate(seed: int = 33) -> Iterator[tuple[str, bytes]]:
    """Hostile files as ``(file name, bytes)``: at least 200, reproducible from ``seed``."""
    rng = random.Random(seed)
    laughs = "&lol9;"
    yield "laughs.docx", docx_from_body(paragraph(laughs), prolog=LAUGHS_DTD)
    yield (
        "laughs.xlsx",
        xlsx(sheet("A1", f'<row r="1">{inline("A1", laughs)}</row>', prolog=LAUGHS_DTD)),
    )
    yield "xxe.docx", docx_from_body(paragraph("&xxe;"), prolog=XXE_DTD)
    yield "xxe.xlsx", xlsx(sheet("A1", f'<row r="1">{inline("A1", "&xxe;")}</row>', prolog=XXE_DTD))
    yield "far.xlsx", xlsx_far_cell()
    yield "bomb.docx", docx_bomb(64 * 1024 * 1024)
    for n in range(20):  # declared-size lies in XLSX
        rows = rng.randint(1, 400)
        dim = rng.choice(["A1:B1", "A1:XFD1048576", "A1:A1", "B2:C3", "A1:ZZ99999", "bogus"])
        yield f"lie{n}.xlsx", xlsx_rows(rows, dimension=dim)
    for n in range(20):  # far and scattered cells
        cells = "".join(
            f'<row r="{r}">{inline(f"{c}{r}", "x")}</row>'
            for r, c in sorted(
                {(rng.randint(1, 1048576), rng.choice(["A", "Q", "AAA", "XFD"])) for _ in range(8)}
            )
        )
        yield f"scatter{n}.xlsx", xlsx(sheet("A1:XFD1048576", cells))
    for n in range(10):  # zip bombs past a 32 MiB cap (the tests' setting)
        size = rng.choice([40, 48, 64]) * 1024 * 1024
        yield f"bomb{n}.docx", docx_bomb(size + n)
    for n in range(25):  # deep nesting
        depth = rng.choice([300, 3000, 30000, 100000])
        body = "<w:p>" + "<w:r>" * depth + "</w:r>" * depth + "</w:p>"
        yield f"deep{n}.docx", docx_from_body(body)
        if n % 2 == 0:
            yield f"deep{n}.xlsx", xlsx(sheet("A1", "<row>" * depth + "</row>" * depth))
    for n in range(8):  # tables: small ones, and ones past a 100,000-cell cap
        rows, cols = rng.choice([(1200, 100), (40, 3000), (25000, 5), (20, 20)])
        yield f"table{n}.docx", docx_table(rows, cols)
    for n in range(30):  # broken XML
        good = docx_table(3, 3)
        cut = rng.randint(10, 200)
        body = paragraph("正文")[:-cut] if n % 3 == 0 else paragraph("正文") + "<w:p><w:r>"
        yield f"broken{n}.docx", docx_from_body(body + "</w:bad>" * (n % 2))
        yield f"junk{n}.docx", good[:100] + bytes(rng.randrange(256) for _ in range(500))
    for n in range(30):  # truncated archives and PDFs
        data = docx_table(5, 5) if n % 2 else xlsx_rows(50)
        suffix = ".docx" if n % 2 else ".xlsx"
        yield f"cut{n}{suffix}", data[: rng.randint(1, len(data) - 1)]
        pdf = minimal_pdf_pages(3)
        yield f"cut{n}.pdf", pdf[: rng.randint(1, len(pdf) - 1)]
    for n in range(10):  # PDFs with lying page counts and garbage xrefs
        pdf = minimal_pdf_pages(2).replace(b"/Count 2", b"/Count 99999999")
        yield f"count{n}.pdf", pdf.replace(b"xref", b"xref" if n % 2 else b"xreg")
