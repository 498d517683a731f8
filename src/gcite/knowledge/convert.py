"""File -> text + metadata: Markdown, plain text, HTML, PDF and DOCX, plus manifests.

Each converter returns Markdown-ish text (headings as ``#`` lines) so the
chunker sees one format. Per-document metadata comes from YAML front matter
(Markdown) and/or a sidecar manifest; the manifest wins on conflicts.

Source: issue 4 item 1; platform design document §3.2.1 (``doc_metadata`` fields
``document_title``, ``source_file_url``, ``access_roles``).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gcite.errors import GciteError

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(
    {".md", ".markdown", ".txt", ".text", ".html", ".htm", ".pdf", ".docx"}
)
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


def _convert_html(data: bytes) -> tuple[str, str | None]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(_decode(data), "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    title_tag = soup.find("title")
    title = title_tag.get_text(strip=True) if title_tag else None
    lines: list[str] = []
    body = soup.body or soup
    for el in body.find_all(["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td"]):
        if el.find_parent(["p", "li", "pre", "td"]) is not None:
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


def _convert_pdf(path: Path) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            raise ConversionError("PDF 已加密，无法提取文本")
        pages = [page.extract_text() or "" for page in reader.pages]
    except ConversionError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise ConversionError(f"PDF 无法解析: {exc}") from exc
    return "\n\n".join(p.strip() for p in pages if p.strip())


def _convert_docx(path: Path) -> tuple[str, dict[str, Any]]:
    import docx

    if not zipfile.is_zipfile(path):
        raise ConversionError("DOCX 文件损坏（不是有效的 zip 包）")
    try:
        document = docx.Document(str(path))
    except (KeyError, ValueError, zipfile.BadZipFile, OSError) as exc:
        raise ConversionError(f"DOCX 无法解析: {exc}") from exc
    lines: list[str] = []
    for para in document.paragraphs:
        text = para.text.strip()
        if not text:
            continue
        style = (para.style.name if para.style is not None else "") or ""
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
    else:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConversionError(f"无法读取文件: {exc.strerror or exc}") from exc
        if suffix in {".html", ".htm"}:
            text, title = _convert_html(data)
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
    "ConversionError",
    "ConvertedDocument",
    "Manifest",
    "convert_file",
    "jsonable",
    "load_manifest",
    "split_front_matter",
]
