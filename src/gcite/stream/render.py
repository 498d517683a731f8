"""Renderers for parsed answers and citation panels: HTML, Markdown and terminal.

- HTML follows the mobile design document §4.3 exactly: each citation is
  ``<sup class="g-cite" data-raw-id="7" data-idx="1">1</sup>`` and the panel is a
  ``div.citation-panel`` of ``div.g-cite-item[data-raw-id]`` rows with the
  source-type icon (§5.2: ``fa-file-lines`` for ``rag``, ``fa-globe`` for ``web``),
  title and ``display_subtitle`` (§5.4: used as is, not rendered when empty).
  All text and attribute values are escaped; only ``http``/``https`` URLs become links.
- Markdown uses footnotes: ``[^1]`` in the text, one definition per cited source.
- Terminal output uses Unicode superscripts (``¹²³``, ``¹⁰``) and a numbered source
  list with ``[知识库]``/``[网页]``; control characters (escape sequences from model or
  web text) are removed so the output cannot drive the terminal.

Pure functions: segments / panel entries in, ``str`` out.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from gcite.stream.panel import PanelEntry
from gcite.stream.parser import Segment

_SUPERSCRIPT: Final = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MD_SPECIAL: Final = re.compile(r"([\\`*_\[\]<>#|!])")

ICON_CLASS: Final = {"rag": "fa-file-lines", "web": "fa-globe"}
SOURCE_LABEL: Final = {"rag": "知识库", "web": "网页"}


def _esc(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def safe_url(url: Any) -> str | None:
    """``url`` when it is an absolute ``http``/``https`` URL without spaces or control
    characters, else ``None`` (``javascript:``, ``oss://``, relative paths are not links)."""
    if not isinstance(url, str):
        return None
    text = url.strip()
    if not text or any(c.isspace() for c in text) or _CONTROL.search(text):
        return None
    try:
        parts = urlsplit(text)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return text


def superscript(n: int) -> str:
    """``n`` in Unicode superscript digits: ``12`` -> ``"¹²"``."""
    return str(n).translate(_SUPERSCRIPT)


def _source_type(chunk: dict[str, Any] | None) -> str:
    if chunk is None:
        return ""
    value = chunk.get("source_type")
    return value if isinstance(value, str) else ""


def _title(entry: PanelEntry) -> str:
    chunk = entry["chunk"]
    if chunk is not None:
        for key in ("document_title", "document_name", "title"):
            value = chunk.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return f"来源 {entry['raw_id']}"


def _subtitle(entry: PanelEntry) -> str:
    chunk = entry["chunk"]
    value = None if chunk is None else chunk.get("display_subtitle")
    return value if isinstance(value, str) else ""


def _url(entry: PanelEntry) -> str | None:
    chunk = entry["chunk"]
    if chunk is None:
        return None
    return safe_url(chunk.get("url")) or safe_url(chunk.get("source_file_url"))


# -- HTML -----------------------------------------------------------------------------


def render_html(segments: Iterable[Segment]) -> str:
    """The answer as an HTML fragment (the inside of ``p.answer-text``, mobile §4.3).

    Text is escaped; each citation becomes
    ``<sup class="g-cite" data-raw-id="RAW" data-idx="N">N</sup>``.
    """
    out: list[str] = []
    for seg in segments:
        if "text" in seg:
            out.append(_esc(seg["text"]))
        elif "cite" in seg:  # reasoning is not answer text (spec §7)
            idx = int(seg["idx"])
            raw_id = _esc(seg["cite"])
            out.append(f'<sup class="g-cite" data-raw-id="{raw_id}" data-idx="{idx}">{idx}</sup>')
    return "".join(out)


def render_panel_html(panel: Sequence[PanelEntry]) -> str:
    """The citation panel markup of mobile §4.3 (``""`` when nothing was cited, §5.1).

    One ``div.g-cite-item`` per entry with ``data-raw-id`` and ``data-source-type``,
    the display index in ``<sup>``, the icon ``<i class="fa-solid fa-globe|fa-file-lines
    g-cite-item-icon">``, the title (a link only for an http(s) ``url`` /
    ``source_file_url``) and the subtitle when non-empty.
    """
    if not panel:
        return ""
    rows = ['<div class="citation-panel">']
    for entry in panel:
        source_type = _source_type(entry["chunk"])
        icon = ICON_CLASS.get(source_type, ICON_CLASS["rag"])
        title = _esc(_title(entry))
        url = _url(entry)
        if url is not None:
            title = (
                f'<a class="g-cite-item-link" href="{_esc(url)}" target="_blank"'
                f' rel="noopener noreferrer">{title}</a>'
            )
        rows.append(
            f'  <div class="g-cite-item" data-raw-id="{_esc(entry["raw_id"])}"'
            f' data-source-type="{_esc(source_type)}">'
        )
        rows.append(f"    <sup>{int(entry['idx'])}</sup>")
        rows.append(f'    <i class="fa-solid {icon} g-cite-item-icon"></i>')
        rows.append(f'    <span class="g-cite-item-title">{title}</span>')
        subtitle = _subtitle(entry)
        if subtitle:
            rows.append(f'    <span class="g-cite-item-subtitle">{_esc(subtitle)}</span>')
        rows.append("  </div>")
    rows.append("</div>")
    return "\n".join(rows)


# -- Markdown -------------------------------------------------------------------------


def _md_inline(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def render_markdown(segments: Iterable[Segment], panel: Sequence[PanelEntry]) -> str:
    """The answer as Markdown with footnote citations ``[^N]`` and their definitions.

    The answer text is kept as written (it is Markdown already). After a blank line
    comes one definition per display index, ``[^N]: [title](url) · subtitle``, titles
    and subtitles escaped, links only for http(s) URLs; a cited index missing from
    ``panel`` gets ``来源 <raw id>``.
    """
    body: list[str] = []
    cited: dict[int, str] = {}
    for seg in segments:
        if "text" in seg:
            body.append(seg["text"])
        elif "cite" in seg:  # reasoning is not answer text (spec §7)
            body.append(f"[^{int(seg['idx'])}]")
            cited.setdefault(int(seg["idx"]), seg["cite"])
    entries = {int(e["idx"]): e for e in panel}
    for idx, raw_id in cited.items():
        entries.setdefault(idx, {"idx": idx, "raw_id": raw_id, "chunk": None})
    if not entries:
        return "".join(body)
    notes: list[str] = []
    for idx in sorted(entries):
        entry = entries[idx]
        title = _md_inline(_title(entry))
        url = _url(entry)
        linkable = url is not None and "<" not in url and ">" not in url
        line = f"[^{idx}]: " + (f"[{title}](<{url}>)" if linkable else title)
        subtitle = _subtitle(entry)
        if subtitle:
            line += f" · {_md_inline(subtitle)}"
        notes.append(line)
    return "".join(body).rstrip("\n") + "\n\n" + "\n".join(notes) + "\n"


# -- terminal -------------------------------------------------------------------------


def clean_terminal(text: str) -> str:
    """``text`` without control characters (keeps newlines and tabs)."""
    return _CONTROL.sub("", text)


def render_terminal(segments: Iterable[Segment]) -> str:
    """The answer for a terminal: control characters removed, citations as superscripts."""
    out: list[str] = []
    for seg in segments:
        if "text" in seg:
            out.append(clean_terminal(seg["text"]))
        elif "cite" in seg:  # reasoning is not answer text (spec §7)
            out.append(superscript(int(seg["idx"])))
    return "".join(out)


def render_sources_terminal(panel: Sequence[PanelEntry]) -> str:
    """The numbered source list for a terminal (``""`` when nothing was cited).

    One line per entry, ``N. [知识库|网页] title — subtitle``, then the http(s) URL
    indented on the next line when there is one.
    """
    if not panel:
        return ""
    lines = ["来源："]
    for entry in panel:
        label = SOURCE_LABEL.get(_source_type(entry["chunk"]), "来源")
        line = f"{int(entry['idx'])}. [{label}] {clean_terminal(' '.join(_title(entry).split()))}"
        subtitle = clean_terminal(" ".join(_subtitle(entry).split()))
        if subtitle:
            line += f" — {subtitle}"
        lines.append(line)
        url = _url(entry)
        if url is not None:
            lines.append(f"   {url}")
    return "\n".join(lines) + "\n"
