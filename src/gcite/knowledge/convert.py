"""File -> text + metadata: Markdown, plain text, HTML, PDF, DOCX, XLSX and CSV, plus manifests.

Each converter returns Markdown-ish text (headings as ``#`` lines, tables as
Markdown tables with their header row) so the chunker sees one format:

* DOCX: paragraphs and top-level tables in document order, streamed from
  ``word/document.xml`` with lxml ``iterparse`` (no DTD, no entity expansion, no
  network; each handled element freed), heading styles from ``word/styles.xml``, the
  title from ``docProps/core.xml``; merged cells repeat their text as python-docx did;
* HTML: headings, paragraphs, list items, ``pre`` and tables (``th`` cells or the
  first row as the header);
* PDF: pdfplumber; tables found on a page become Markdown tables at their place,
  the rest of the page is text whose line breaks inside a paragraph are joined
  (:func:`join_pdf_lines`: no break between two CJK characters, a space between
  two Latin words);
* XLSX: one ``## <sheet>`` section per sheet (openpyxl's read-only sheet parser, values
  only), read by its real cells: the declared ``<dimension>`` is ignored; CSV: one table.

Every zip member is streamed once first, counting its unzipped bytes and ratio. HTML,
CSV, PDF, DOCX and XLSX are converted in a bounded child process
(:mod:`gcite.knowledge.sandbox`); every cap is a setting (:class:`ConvertLimits`) and
every refusal one :class:`ConversionError` (413 a limit, 415 the type, 422 unparsable).

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

from gcite.knowledge.limits import (
    MAX_FILE_BYTES,
    MIB,
    CellBudget,
    ConversionError,
    ConvertLimits,
    over_limit,
)
from gcite.knowledge.sandbox import run_bounded

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(
    {".md", ".markdown", ".txt", ".text", ".html", ".htm", ".pdf", ".docx", ".xlsx", ".csv"}
)
TEXT_SUFFIXES: frozenset[str] = frozenset({".md", ".markdown", ".txt", ".text"})
"""Plain-text formats; these are streamed at ingest (:func:`iter_text_lines`)."""


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


def _html_table(table: Any, budget: CellBudget) -> str:
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
    return _table(([header] if header else []) + rows, budget)


def _convert_html(data: bytes, limits: ConvertLimits) -> tuple[str, str | None]:
    from bs4 import BeautifulSoup

    budget = CellBudget(limits)
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
            table = _html_table(el, budget)
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


def _pdf_page(page: Any, budget: CellBudget) -> list[str]:
    """Text and Markdown tables of one pdfplumber page, in reading order (top to bottom).

    Tables are looked for only on a page with ruling lines: pdfplumber's default table
    finder builds tables from the page's edges (lines, rectangles, curves), so a page
    without any has none, and most pages of a text document skip the detection.
    """
    tables = page.find_tables() if page.edges else []
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
        md = _table(table.extract(), budget)
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


def _table(rows: list[list[Any]], budget: CellBudget) -> str:
    """:func:`markdown_table` of ``rows`` after counting its cells against ``budget``."""
    budget.take(sum(len(row) for row in rows))
    budget.check_area(len(rows), max((len(row) for row in rows), default=0))
    return markdown_table(rows)


def _convert_pdf(path: Path, limits: ConvertLimits) -> str:
    import pdfplumber
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfparser import PDFSyntaxError
    from pdfminer.psparser import PSException
    from pdfplumber.utils.exceptions import PdfminerException

    budget = CellBudget(limits)
    blocks: list[str] = []
    try:
        with pdfplumber.open(str(path)) as pdf:
            objects = sum(len(list(xref.get_objids())) for xref in pdf.doc.xrefs)
            if objects > limits.max_pdf_objects:
                raise over_limit("PDF 对象数", "convert_max_pdf_objects", limits.max_pdf_objects)
            pages = pdf.pages
            if len(pages) > limits.max_pdf_pages:
                raise over_limit("PDF 页数", "convert_max_pdf_pages", limits.max_pdf_pages)
            for page in pages:
                blocks.extend(_pdf_page(page, budget))
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


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_STREAM_BLOCK = 1 << 20
_MAX_SPAN = 64  # grid columns one DOCX cell may span (Word allows 63)


def _xml_parser() -> Any:
    """An lxml parser that loads no DTD, expands no entity and reaches no network."""
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True, huge_tree=False)


def _check_zip(archive: zipfile.ZipFile, limits: ConvertLimits) -> None:
    """Stream every member once, counting decompressed bytes against the caps.

    Declared sizes are not trusted: the bytes are counted as they inflate, and a
    member stops at ``max_unzipped_bytes`` or, past 1 MiB, at ``max_zip_ratio`` times
    its compressed size. A corrupt member (bad CRC, truncated) is a 422.
    """
    for info in archive.infolist():
        if info.is_dir():
            continue
        count = 0
        with archive.open(info) as member:
            while block := member.read(_STREAM_BLOCK):
                count += len(block)
                if count > limits.max_unzipped_bytes:
                    raise over_limit(
                        f"压缩包成员 {info.filename} 解压后大小",
                        "convert_max_unzipped_bytes",
                        limits.max_unzipped_bytes,
                    )
                if count > MIB and count > limits.max_zip_ratio * max(info.compress_size, 1):
                    raise over_limit(
                        f"压缩包成员 {info.filename} 的压缩比",
                        "convert_max_zip_ratio",
                        limits.max_zip_ratio,
                    )


def _open_zip(path: Path, kind: str, limits: ConvertLimits) -> zipfile.ZipFile:
    if not zipfile.is_zipfile(path):
        raise ConversionError(f"{kind} 文件损坏（不是有效的 zip 包）")
    archive = zipfile.ZipFile(path)
    try:
        _check_zip(archive, limits)
    except BaseException:
        archive.close()
        raise
    return archive


def _part(archive: zipfile.ZipFile, rels: str, kind: str, default: str) -> str | None:
    """The target of the first relationship of type ``.../<kind>`` in part ``rels``."""
    from lxml import etree

    try:
        root = etree.fromstring(archive.read(rels), _xml_parser())
    except KeyError:
        root = None
    if root is not None:
        base = rels.rsplit("_rels/", 1)[0]
        for rel in root.iter(_REL):
            if str(rel.get("Type", "")).endswith("/" + kind):
                target = str(rel.get("Target", ""))
                name = target.lstrip("/") if target.startswith("/") else base + target
                return name if name in archive.namelist() else None
    return default if default in archive.namelist() else None


def _run_text(run: Any) -> str:
    parts: list[str] = []
    for child in run:
        tag = child.tag
        if tag == _W + "t":
            parts.append(child.text or "")
        elif tag in (_W + "tab", _W + "ptab"):
            parts.append("\t")
        elif tag in (_W + "br", _W + "cr"):
            parts.append("\n")
        elif tag == _W + "noBreakHyphen":
            parts.append("-")
    return "".join(parts)


def _paragraph_text(paragraph: Any) -> str:
    """Runs directly in the paragraph and in its hyperlinks, insertions and smart tags."""
    parts: list[str] = []
    for child in paragraph:
        if child.tag == _W + "r":
            parts.append(_run_text(child))
        elif child.tag in (_W + "hyperlink", _W + "ins", _W + "smartTag"):
            parts.extend(_run_text(run) for run in child.iterchildren(_W + "r"))
    return "".join(parts)


def _row_texts(row: Any, above: list[str]) -> list[str]:
    """One table row as grid cells: spans repeated, vertical merges take the text above."""
    out: list[str] = []
    for cell in row.iterchildren(_W + "tc"):
        span, merged = 1, False
        props = cell.find(_W + "tcPr")
        if props is not None:
            grid = props.find(_W + "gridSpan")
            if grid is not None:
                value = str(grid.get(_W + "val", "1"))
                span = min(max(int(value), 1), _MAX_SPAN) if value.isdigit() else 1
            vmerge = props.find(_W + "vMerge")
            merged = vmerge is not None and vmerge.get(_W + "val", "continue") == "continue"
        if merged and len(above) > len(out):
            text = above[len(out)]
        else:
            text = "\n".join(_paragraph_text(p) for p in cell.iterchildren(_W + "p"))
        out.extend([text] * span)
    return out


def _styles(archive: zipfile.ZipFile, part: str | None) -> dict[str, str]:
    """Paragraph style id -> style name (``Heading 1``, ``Title``...)."""
    from lxml import etree

    if part is None:
        return {}
    root = etree.fromstring(archive.read(part), _xml_parser())
    names: dict[str, str] = {}
    for style in root.iter(_W + "style"):
        name = style.find(_W + "name")
        style_id = style.get(_W + "styleId")
        if style_id is not None:
            names[str(style_id)] = str(name.get(_W + "val", style_id)) if name is not None else ""
    return names


def _heading(style: str) -> str:
    level = re.match(r"heading (\d)", style.lower())
    if level:
        return "#" * int(level.group(1)) + " "
    return "# " if style.lower() == "title" else ""


def _release(element: Any) -> None:
    """Free a handled element and the siblings before it (the streamed tree stays small)."""
    element.clear()
    parent = element.getparent()
    if parent is not None:
        while element.getprevious() is not None:
            del parent[0]


def _convert_docx(path: Path, limits: ConvertLimits) -> tuple[str, dict[str, Any]]:
    """Paragraphs and top-level tables of ``word/document.xml``, streamed (lxml iterparse)."""
    from lxml import etree

    budget = CellBudget(limits)
    with _open_zip(path, "DOCX", limits) as archive:
        main = _part(archive, "_rels/.rels", "officeDocument", "word/document.xml")
        if main is None:
            raise ConversionError("DOCX 文件损坏（缺少正文 word/document.xml）")
        folder, _, leaf = main.rpartition("/")
        rels = f"{folder}/_rels/{leaf}.rels" if folder else f"_rels/{leaf}.rels"
        styles = _styles(archive, _part(archive, rels, "styles", "word/styles.xml"))
        lines: list[str] = []
        rows: list[list[str]] = []
        body, table = _W + "body", _W + "tbl"
        with archive.open(main) as stream:
            events = etree.iterparse(
                stream,
                events=("end",),
                tag=(_W + "p", _W + "tr", table),
                resolve_entities=False,
                load_dtd=False,
                no_network=True,
                huge_tree=False,
            )
            for _, element in events:
                parent = element.getparent()
                if parent is None:
                    continue
                if element.tag == _W + "tr":
                    grand = parent.getparent()
                    if parent.tag == table and grand is not None and grand.tag == body:
                        cells = _row_texts(element, rows[-1] if rows else [])
                        budget.take(len(cells))
                        rows.append(cells)
                        _release(element)
                    continue
                if parent.tag != body:
                    continue
                if element.tag == table:
                    budget.check_area(len(rows), max((len(r) for r in rows), default=0))
                    text = markdown_table(rows)
                    rows = []
                    if text:
                        lines.append(text)
                else:
                    text = _paragraph_text(element).strip()
                    if text:
                        style_ref = element.find(f"{_W}pPr/{_W}pStyle")
                        style_id = style_ref.get(_W + "val", "") if style_ref is not None else ""
                        style = styles.get(str(style_id), str(style_id))
                        lines.append(_heading(style) + text)
                _release(element)
        meta: dict[str, Any] = {}
        core = _part(archive, "_rels/.rels", "core-properties", "docProps/core.xml")
        if core is not None:
            root = etree.fromstring(archive.read(core), _xml_parser())
            title = root.find("{http://purl.org/dc/elements/1.1/}title")
            if title is not None and title.text and title.text.strip():
                meta["document_title"] = title.text.strip()
    return "\n\n".join(lines), meta


def _convert_xlsx(path: Path, limits: ConvertLimits) -> str:
    """Every sheet by its real cells: the declared dimension is ignored (never trusted)."""
    import openpyxl
    from openpyxl.worksheet._reader import WorkSheetParser

    budget = CellBudget(limits)
    with _open_zip(path, "XLSX", limits):
        pass
    book = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
    parts: list[str] = []
    try:
        for sheet in book.worksheets:
            rows: list[dict[int, Any]] = []
            with sheet._get_source() as source:
                parser = WorkSheetParser(
                    source,
                    sheet._shared_strings,
                    data_only=True,
                    epoch=book.epoch,
                    date_formats=book._date_formats,
                    timedelta_formats=book._timedelta_formats,
                )
                for _, cells in parser.parse():
                    values = {
                        int(c["column"]): c["value"]
                        for c in cells
                        if c["value"] is not None and c["value"] != ""
                    }
                    if values:
                        budget.take(len(values))
                        rows.append(values)
            columns = sorted(set().union(*rows)) if rows else []
            budget.check_area(len(rows), len(columns))
            table = markdown_table([[row.get(c) for c in columns] for row in rows])
            if table:
                parts.append(f"## {sheet.title}\n\n{table}")
    finally:
        book.close()
    return "\n\n".join(parts)


def _convert_csv(data: bytes, limits: ConvertLimits) -> str:
    text = _decode(data)
    try:
        dialect: Any = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    budget = CellBudget(limits)
    rows: list[list[Any]] = []
    try:
        for row in csv.reader(io.StringIO(text), dialect):
            budget.take(len(row))
            rows.append(list(row))
    except csv.Error as exc:
        raise ConversionError(f"CSV 无法解析: {exc}") from exc
    budget.check_area(len(rows), max((len(row) for row in rows), default=0))
    return markdown_table(rows)


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
        raise ConversionError(f"文件过大: {size} 字节，上限 {MAX_FILE_BYTES} 字节", status=413)
    markdown = path.suffix.lower() in {".md", ".markdown"}
    for encoding in ("utf-8-sig", "gb18030"):
        scan = _LineScan(markdown)
        try:
            for number, (line, _) in enumerate(_decoded_lines(path, encoding)):
                scan.add(number, line)
        except UnicodeDecodeError:
            continue
        except OSError as exc:
            raise ConversionError(f"无法读取文件: {exc.strerror or exc}") from exc
        return scan.result(encoding, size)
    raise ConversionError("文本编码无法识别（支持 UTF-8 与 GB18030）")


class _LineScan:
    """One decoding pass of :func:`scan_text`: the hash, a leading front matter block
    (Markdown only), the first heading and whether the body has any text."""

    def __init__(self, markdown: bool) -> None:
        self.markdown = markdown
        self.digest = hashlib.sha256()
        self.head: list[str] = []
        self.in_front = False  # inside a front matter block that opened on line 0
        self.body_line = 0
        self.title: str | None = None
        self.has_text = False

    def add(self, number: int, line: str) -> None:
        """Line ``number`` (from 0), without its newline."""
        self.digest.update(line.encode("utf-8") + b"\n")
        if number == 0 and self.markdown and line.strip() == "---":
            self.in_front = True
        if self.in_front:
            self.head.append(line)
            if number > 0 and line.strip() in {"---", "..."}:
                self.in_front, self.body_line = False, number + 1
            elif len(self.head) > 2000 or sum(map(len, self.head)) > MAX_FRONT_MATTER:
                self.in_front, self.head = False, []  # no front matter after all
            return
        self.has_text = self.has_text or bool(line.strip())
        if self.title is None and line.startswith("#"):
            match = _MD_HEADING.match(line)
            self.title = match.group(2).strip() if match else None

    def result(self, encoding: str, size: int) -> TextScan:
        """The scan of the whole file; :class:`ConversionError` when it has no text."""
        metadata: dict[str, Any] = {}
        has_text, title = self.has_text, self.title
        if self.in_front:  # a "---" line that never closed: ordinary text
            has_text = has_text or any(line.strip() for line in self.head)
            title = title or _first_heading("\n".join(self.head))
        elif self.body_line:
            metadata, _ = split_front_matter("\n".join(self.head) + "\n")
        if not has_text:
            raise ConversionError("文件中没有可提取的文本")
        return TextScan(encoding, self.digest.hexdigest(), size, metadata, title, self.body_line)


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


SANDBOXED_SUFFIXES: frozenset[str] = frozenset({".html", ".htm", ".pdf", ".docx", ".xlsx", ".csv"})
"""Formats converted in a bounded child process (:func:`~gcite.knowledge.sandbox.run_bounded`)."""


def _convert_bounded(path: str, limits: ConvertLimits) -> tuple[str, dict[str, Any], str | None]:
    """The body of a sandboxed conversion: (text, metadata, title) of one non-text file."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix == ".pdf":
        return _convert_pdf(file, limits), {}, None
    if suffix == ".docx":
        text, metadata = _convert_docx(file, limits)
        return text, metadata, None
    if suffix == ".xlsx":
        return _convert_xlsx(file, limits), {}, None
    data = _read(file)
    if suffix == ".csv":
        return _convert_csv(data, limits), {}, None
    text, title = _convert_html(data, limits)
    return text, {}, title


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConversionError(f"无法读取文件: {exc.strerror or exc}") from exc


def convert_file(path: Path, limits: ConvertLimits | None = None) -> ConvertedDocument:
    """Convert one file to :class:`ConvertedDocument` within ``limits`` (defaults if None).

    HTML, CSV, PDF, DOCX and XLSX are converted in a child process bounded in memory,
    CPU and wall-clock time (:mod:`gcite.knowledge.sandbox`); Markdown and text are read
    here (at most :data:`MAX_FILE_BYTES`). Raises :class:`ConversionError` naming the
    reason: 415 unsupported type, 413 too large or a limit exceeded (``limit`` names
    the setting), 422 unreadable, corrupt or no text.
    """
    limits = limits or ConvertLimits()
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise ConversionError(f"不支持的文件类型: {suffix or '(无扩展名)'}", status=415)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ConversionError(f"无法读取文件: {exc.strerror or exc}") from exc
    if size > MAX_FILE_BYTES:
        raise ConversionError(f"文件过大: {size} 字节，上限 {MAX_FILE_BYTES} 字节", status=413)
    metadata: dict[str, Any] = {}
    title: str | None = None
    if suffix in SANDBOXED_SUFFIXES:
        text, metadata, title = run_bounded(_convert_bounded, (str(path), limits), limits)
    else:
        text = _decode(_read(path))
        if suffix in {".md", ".markdown"}:
            metadata, text = split_front_matter(text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    if not text.strip():
        raise ConversionError("文件中没有可提取的文本")
    return ConvertedDocument(text=text, metadata=metadata, title=title or _first_heading(text))


__all__ = [
    "MAX_FILE_BYTES",
    "SANDBOXED_SUFFIXES",
    "SUPPORTED_SUFFIXES",
    "TEXT_SUFFIXES",
    "ConversionError",
    "ConvertLimits",
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
