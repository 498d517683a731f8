"""File -> text + metadata: Markdown, plain text, HTML, PDF, DOCX, XLSX and CSV, plus manifests.

Each converter returns Markdown-ish text (headings as ``#`` lines, tables as
Markdown tables with their header row) so the chunker sees one format:

* DOCX: paragraphs and tables in document order (python-docx);
* HTML: headings, paragraphs, list items, ``pre`` and tables (``th`` cells or the
  first row as the header);
* PDF: pdfplumber; tables found on a page become Markdown tables at their place,
  the rest of the page is text whose line breaks inside a paragraph are joined
  (:func:`join_pdf_lines`: no break between two CJK characters, a space between
  two Latin words);
* XLSX: one ``## <sheet>`` section per sheet (openpyxl, values only); CSV: one table.

Per-document metadata comes from YAML front matter (Markdown) and/or a sidecar
manifest; the manifest wins on conflicts.

Source: platform design document §3.2.1
(``doc_metadata`` fields ``document_title``, ``source_file_url``, ``access_roles``).
"""

from __future__ import annotations

import codecs
import csv
import datetime as _dt
import hashlib
import io
import json
import re
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gcite.errors import GciteError

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(
    {".md", ".markdown", ".txt", ".text", ".html", ".htm", ".pdf", ".docx", ".xlsx", ".csv"}
)
TEXT_SUFFIXES: frozenset[str] = frozenset({".md", ".markdown", ".txt", ".text"})
"""Plain-text formats; these are streamed at ingest (:func:`iter_text_lines`)."""
MAX_FILE_BYTES = 50 * 1024 * 1024  # larger files are refused, not truncated


class ConversionError(GciteError):
    """A file could not be read or converted (the message names the reason)."""


@dataclass
class ConvertedDocument:
    """The text of one file and the metadata found in it.

    ``text`` is Markdown-ish UTF-8 text; ``metadata`` holds front-matter fields
    (JSON-compatible values: dates become ISO strings); ``title`` is the first
    heading or ``None``.
    """

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    title: str | None = None


@dataclass
class Manifest:
    """A sidecar manifest: ``dataset_name`` and per-file metadata.

    Accepts the ``laws.meta.json`` format as is::

        {"dataset_name": "...", "documents": {"<file name or relative path>": {...}}}

    JSON or YAML. Keys are matched against the path relative to the ingest root,
    then against the bare file name.
    """

    dataset_name: str | None
    documents: dict[str, dict[str, Any]]

    def metadata_for(self, path: Path, root: Path | None) -> dict[str, Any] | None:
        """Metadata for ``path`` (relative key first, then file name), or ``None``."""
        if root is not None:
            try:
                rel = path.relative_to(root).as_posix()
            except ValueError:
                rel = None
            if rel is not None and rel in self.documents:
                return dict(self.documents[rel])
        found = self.documents.get(path.name)
        return dict(found) if found is not None else None


def jsonable(value: Any) -> Any:
    """Make a YAML/JSON value JSON-compatible (dates -> ISO strings, tuples -> lists)."""
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def load_manifest(path: Path) -> Manifest:
    """Read a sidecar manifest (JSON or YAML). Raises :class:`ConversionError`."""
    try:
        raw_text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversionError(f"无法读取清单文件 {path}: {exc}") from exc
    try:
        data = json.loads(raw_text) if path.suffix.lower() == ".json" else yaml.safe_load(raw_text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConversionError(f"清单文件 {path} 格式错误: {exc}") from exc
    if not isinstance(data, dict):
        raise ConversionError(f"清单文件 {path} 必须是对象 (JSON/YAML mapping)")
    docs = data.get("documents", {})
    if not isinstance(docs, dict) or not all(isinstance(v, dict) for v in docs.values()):
        raise ConversionError(f"清单文件 {path} 的 documents 必须是 文件名 -> 元数据对象 的映射")
    name = data.get("dataset_name")
    if name is not None and not isinstance(name, str):
        raise ConversionError(f"清单文件 {path} 的 dataset_name 必须是字符串")
    return Manifest(
        dataset_name=name or None,
        documents={str(k): jsonable(v) for k, v in docs.items()},
    )


_CN_DIGITS = "零〇一二三四五六七八九十百千万两"
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split YAML front matter from Markdown. Raises :class:`ConversionError` if malformed."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise ConversionError(f"YAML front matter 格式错误: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConversionError("YAML front matter 必须是键值映射")
    return jsonable(data), text[match.end() :]


def _first_heading(text: str) -> str | None:
    match = _MD_HEADING.search(text)
    return match.group(2).strip() if match else None


def _decode(data: bytes) -> str:
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise ConversionError("文本编码无法识别（支持 UTF-8 与 GB18030）")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, _dt.datetime) and value.time() == _dt.time(0):
        value = value.date()
    text = value.isoformat() if isinstance(value, _dt.date) else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table(rows: list[list[Any]]) -> str:
    """Rows (the first is the header) -> a Markdown table; ``""`` when no cell has text.

    Cells are single-line (whitespace collapsed, ``|`` escaped); short rows are
    padded; rows and columns that are entirely empty are dropped.
    """
    cells = [[_cell(v) for v in row] for row in rows]
    cells = [row for row in cells if any(row)]
    if not cells:
        return ""
    width = max(len(row) for row in cells)
    cells = [row + [""] * (width - len(row)) for row in cells]
    keep = [i for i in range(width) if any(row[i] for row in cells)]
    cells = [[row[i] for i in keep] for row in cells]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + " --- |" * len(keep)]
    lines += ["| " + " | ".join(row) + " |" for row in cells[1:]]
    return "\n".join(lines)


def _html_table(table: Any) -> str:
    rows: list[list[str]] = []
    header: list[str] | None = None
    for tr in table.find_all("tr"):
        if tr.find_parent("table") is not table:
            continue
        cells = tr.find_all(["th", "td"], recursive=False)
        texts = [c.get_text(" ", strip=True) for c in cells]
        if header is None and cells and all(c.name == "th" for c in cells):
            header = texts
        else:
            rows.append(texts)
    return markdown_table(([header] if header else []) + rows)


def _convert_html(data: bytes) -> tuple[str, str | None]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(_decode(data), "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    title_tag = soup.find("title")
    title = title_tag.get_text(strip=True) if title_tag else None
    lines: list[str] = []
    body = soup.body or soup
    blocks = ["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td", "table"]
    for el in body.find_all(blocks):
        if el.find_parent(["p", "li", "pre", "td", "th", "table"]) is not None:
            continue
        if el.name == "table":
            table = _html_table(el)
            if table:
                lines.append(table)
            continue
        text = el.get_text(" ", strip=True)
        if not text:
            continue
        if el.name and el.name[0] == "h" and el.name[1:].isdigit():
            lines.append("#" * int(el.name[1:]) + " " + text)
        else:
            lines.append(text)
    if not lines:
        lines = [t for t in body.get_text("\n").splitlines() if t.strip()]
    return "\n\n".join(lines), title or None


_CJK = r"\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef"
_PARA_END = re.compile(r"[。！？!?：:；;」』”）)]$|[.。]$")
_LIST_START = re.compile(
    rf"^\s*(?:[#>|*\-•●▪]|\d+[.、)）]|[（(][{_CN_DIGITS}\d]+[)）]|[{_CN_DIGITS}]+、|第[{_CN_DIGITS}\d]+[章节条款])"
)


def join_pdf_lines(text: str) -> str:
    """Join the line breaks a PDF puts inside paragraphs.

    A line is joined to the next unless it ends a sentence or clause
    (``。！？：；`` and closing quotes), the next line is blank, or the next line
    starts a list item, a heading or an article (``第X条``, ``一、``, ``1.``,
    ``（一）``, ``•``). Between two CJK characters (or CJK punctuation) nothing is
    inserted; otherwise one space. Pure; blank lines (paragraph breaks) are kept.
    """
    out: list[str] = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            out.append("")
            continue
        if out and out[-1] and not _PARA_END.search(out[-1]) and not _LIST_START.match(line):
            prev = out[-1]
            cjk_edge = re.match(rf"[{_CJK}]", prev[-1]) or re.match(rf"[{_CJK}]", line[0])
            out[-1] = prev + ("" if cjk_edge else " ") + line
        else:
            out.append(line)
    return "\n".join(out)


def _pdf_page(page: Any) -> list[str]:
    """Text and Markdown tables of one pdfplumber page, in reading order (top to bottom)."""
    tables = page.find_tables()
    boxes = [t.bbox for t in tables]

    def outside(obj: dict[str, Any]) -> bool:
        if obj.get("object_type") != "char":
            return True
        x = (obj["x0"] + obj["x1"]) / 2
        y = (obj["top"] + obj["bottom"]) / 2
        return not any(x0 <= x <= x1 and top <= y <= bottom for x0, top, x1, bottom in boxes)

    items: list[tuple[float, str]] = []
    text_page = page.filter(outside) if boxes else page
    lines = text_page.extract_text_lines(layout=False, strip=True, return_chars=False)
    previous_bottom: float | None = None
    for line in lines:
        gap = previous_bottom is not None and line["top"] - previous_bottom > 0.8 * (
            line["bottom"] - line["top"]
        )
        items.append((line["top"], ("\n" if gap else "") + line["text"]))
        previous_bottom = line["bottom"]
    for table in tables:
        md = markdown_table(table.extract())
        if md:
            items.append((table.bbox[1], "\n" + md + "\n"))
    items.sort(key=lambda item: item[0])
    blocks: list[str] = []
    pending: list[str] = []
    for _, text in items:
        if text.startswith("\n|"):
            if pending:
                blocks.append(join_pdf_lines("\n".join(pending)))
                pending = []
            blocks.append(text.strip())
        else:
            pending.append(text)
    if pending:
        blocks.append(join_pdf_lines("\n".join(pending)))
    return [b for b in blocks if b.strip()]


def _convert_pdf(path: Path) -> str:
    import pdfplumber
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfparser import PDFSyntaxError
    from pdfminer.psparser import PSException
    from pdfplumber.utils.exceptions import PdfminerException

    blocks: list[str] = []
    try:
        with pdfplumber.open(str(path)) as pdf:
            for page in pdf.pages:
                blocks.extend(_pdf_page(page))
                page.close()
    except (PDFPasswordIncorrect, PDFEncryptionError) as exc:
        raise ConversionError("PDF 已加密，无法提取文本") from exc
    except PdfminerException as exc:
        cause = exc.args[0] if exc.args else exc
        if isinstance(cause, PDFPasswordIncorrect | PDFEncryptionError):
            raise ConversionError("PDF 已加密，无法提取文本") from exc
        raise ConversionError(f"PDF 无法解析: {cause}") from exc
    except (PDFSyntaxError, PSException, ValueError, KeyError, TypeError, OSError) as exc:
        raise ConversionError(f"PDF 无法解析: {exc}") from exc
    return "\n\n".join(blocks)


def _convert_docx(path: Path) -> tuple[str, dict[str, Any]]:
    import docx

    if not zipfile.is_zipfile(path):
        raise ConversionError("DOCX 文件损坏（不是有效的 zip 包）")
    try:
        document = docx.Document(str(path))
    except (KeyError, ValueError, zipfile.BadZipFile, OSError) as exc:
        raise ConversionError(f"DOCX 无法解析: {exc}") from exc
    from docx.table import Table

    lines: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            table = markdown_table([[cell.text for cell in row.cells] for row in block.rows])
            if table:
                lines.append(table)
            continue
        text = block.text.strip()
        if not text:
            continue
        style = (block.style.name if block.style is not None else "") or ""
        level = re.match(r"Heading (\d)", style)
        if level:
            lines.append("#" * int(level.group(1)) + " " + text)
        elif style == "Title":
            lines.append("# " + text)
        else:
            lines.append(text)
    meta: dict[str, Any] = {}
    title = document.core_properties.title
    if title:
        meta["document_title"] = title
    return "\n\n".join(lines), meta


def _convert_xlsx(path: Path) -> str:
    import openpyxl

    if not zipfile.is_zipfile(path):
        raise ConversionError("XLSX 文件损坏（不是有效的 zip 包）")
    try:
        book = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
    except (KeyError, ValueError, zipfile.BadZipFile, OSError) as exc:
        raise ConversionError(f"XLSX 无法解析: {exc}") from exc
    parts: list[str] = []
    try:
        for sheet in book.worksheets:
            table = markdown_table([list(row) for row in sheet.iter_rows(values_only=True)])
            if table:
                parts.append(f"## {sheet.title}\n\n{table}")
    finally:
        book.close()
    return "\n\n".join(parts)


def _convert_csv(data: bytes) -> str:
    text = _decode(data)
    try:
        dialect: Any = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    try:
        rows = list(csv.reader(io.StringIO(text), dialect))
    except csv.Error as exc:
        raise ConversionError(f"CSV 无法解析: {exc}") from exc
    return markdown_table([list(r) for r in rows])


READ_BLOCK = 1 << 20  # bytes per read of a streamed text file (and the longest line kept whole)
MAX_FRONT_MATTER = 64 * 1024


@dataclass
class TextScan:
    """What one pass over a plain-text file found (:func:`scan_text`).

    ``encoding`` (``utf-8-sig`` or ``gb18030``), ``digest`` (SHA-256 hex of the bytes),
    ``size`` (bytes), ``metadata`` (front matter), ``title`` (first heading or ``None``),
    ``body_line`` (index of the first line after the front matter).
    """

    encoding: str
    digest: str
    size: int
    metadata: dict[str, Any]
    title: str | None
    body_line: int


def _raw_lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while True:
            raw = fh.readline(READ_BLOCK)
            if not raw:
                return
            yield raw


def _decoded_lines(path: Path, encoding: str) -> Iterator[tuple[str, int]]:
    """(line without its newline, bytes consumed) in order; raises UnicodeDecodeError."""
    decoder = codecs.getincrementaldecoder(encoding)()
    for raw in _raw_lines(path):
        text = decoder.decode(raw)
        yield text.rstrip("\r\n").replace("\x00", ""), len(raw)
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail, 0


def scan_text(path: Path) -> TextScan:
    """One streamed pass over a ``.md``/``.txt`` file: encoding, hash, front matter, title.

    Memory is bounded by :data:`READ_BLOCK` whatever the file size. Raises
    :class:`ConversionError` (unreadable, too large, undecodable, malformed front
    matter, no text).
    """
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ConversionError(f"无法读取文件: {exc.strerror or exc}") from exc
    if size > MAX_FILE_BYTES:
        raise ConversionError(f"文件过大: {size} 字节，上限 {MAX_FILE_BYTES} 字节")
    markdown = path.suffix.lower() in {".md", ".markdown"}
    for encoding in ("utf-8-sig", "gb18030"):
        digest = hashlib.sha256()
        head: list[str] = []
        in_front = False  # inside a front matter block that opened on line 0
        body_line = 0
        title: str | None = None
        has_text = False
        try:
            for number, (line, _) in enumerate(_decoded_lines(path, encoding)):
                digest.update(line.encode("utf-8") + b"\n")
                if number == 0 and markdown and line.strip() == "---":
                    in_front = True
                if in_front:
                    head.append(line)
                    if number > 0 and line.strip() in {"---", "..."}:
                        in_front, body_line = False, number + 1
                    elif len(head) > 2000 or sum(map(len, head)) > MAX_FRONT_MATTER:
                        in_front, head = False, []  # no front matter after all
                    continue
                has_text = has_text or bool(line.strip())
                if title is None and line.startswith("#"):
                    match = _MD_HEADING.match(line)
                    title = match.group(2).strip() if match else None
        except UnicodeDecodeError:
            continue
        except OSError as exc:
            raise ConversionError(f"无法读取文件: {exc.strerror or exc}") from exc
        break
    else:
        raise ConversionError("文本编码无法识别（支持 UTF-8 与 GB18030）")
    metadata: dict[str, Any] = {}
    if in_front:  # a "---" line that never closed: ordinary text
        has_text = has_text or any(line.strip() for line in head)
        title = title or _first_heading("\n".join(head))
    elif body_line:
        metadata, _ = split_front_matter("\n".join(head) + "\n")
    if not has_text:
        raise ConversionError("文件中没有可提取的文本")
    return TextScan(encoding, digest.hexdigest(), size, metadata, title, body_line)


def iter_text_lines(path: Path, scan: TextScan) -> Iterator[tuple[str, int]]:
    """The body lines of a scanned text file, with the bytes each consumed (for progress).

    Lines longer than :data:`READ_BLOCK` bytes come in pieces. Raises
    :class:`ConversionError` when the file cannot be read any more.
    """
    try:
        for number, (line, used) in enumerate(_decoded_lines(path, scan.encoding)):
            if number >= scan.body_line:
                yield line, used
            else:
                yield "", used
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversionError(f"无法读取文件: {exc}") from exc


def convert_file(path: Path) -> ConvertedDocument:
    """Convert one file to :class:`ConvertedDocument`.

    Raises :class:`ConversionError` naming the reason (unsupported type, too
    large, unreadable, corrupt, no text).
    """
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise ConversionError(f"不支持的文件类型: {suffix or '(无扩展名)'}")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ConversionError(f"无法读取文件: {exc.strerror or exc}") from exc
    if size > MAX_FILE_BYTES:
        raise ConversionError(f"文件过大: {size} 字节，上限 {MAX_FILE_BYTES} 字节")
    metadata: dict[str, Any] = {}
    title: str | None = None
    if suffix == ".pdf":
        text = _convert_pdf(path)
    elif suffix == ".docx":
        text, metadata = _convert_docx(path)
    elif suffix == ".xlsx":
        text = _convert_xlsx(path)
    else:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConversionError(f"无法读取文件: {exc.strerror or exc}") from exc
        if suffix in {".html", ".htm"}:
            text, title = _convert_html(data)
        elif suffix == ".csv":
            text = _convert_csv(data)
        else:
            text = _decode(data)
            if suffix in {".md", ".markdown"}:
                metadata, text = split_front_matter(text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    if not text.strip():
        raise ConversionError("文件中没有可提取的文本")
    return ConvertedDocument(text=text, metadata=metadata, title=title or _first_heading(text))


__all__ = [
    "MAX_FILE_BYTES",
    "SUPPORTED_SUFFIXES",
    "TEXT_SUFFIXES",
    "ConversionError",
    "ConvertedDocument",
    "Manifest",
    "TextScan",
    "convert_file",
    "iter_text_lines",
    "join_pdf_lines",
    "jsonable",
    "load_manifest",
    "markdown_table",
    "scan_text",
    "split_front_matter",
]
