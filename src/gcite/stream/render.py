"""Renderers for parsed answers and citation panels: HTML, Markdown and terminal.

- HTML follows the mobile design document §4.3 exactly: each citation is
  ``<sup class="g-cite" data-raw-id="7" data-idx="1">1</sup>`` and the panel is a
  ``div.citation-panel`` of ``div.g-cite-item[data-raw-id]`` rows with the
  source-type icon (§5.2: ``fa-file-lines`` for ``rag``, ``fa-globe`` for ``web``),
  title and ``display_subtitle`` (§5.4: used as is, not rendered when empty).
  All text and attribute values are escaped; only ``http``/``https`` URLs become links.
- Markdown (citation-markers.md §7): the answer as written, each citation a Unicode
  superscript in place (``¹``, adjacent ones ``¹˒²``) — never Markdown syntax of its own
  (no footnote, no link, no definition is made from a marker) — then a numbered source
  list.
- Terminal output uses the same superscripts and a numbered source list with
  ``[知识库]``/``[网页]``; control characters (escape sequences from model or web text)
  are removed so the output cannot drive the terminal. :class:`MarkdownBlocks` cuts a
  streaming answer into complete top-level Markdown blocks for rich's Markdown.

Pure functions: segments / panel entries in, ``str`` out.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

from gcite.stream.panel import PanelEntry, entry_subtitle, entry_title, entry_url, source_rows
from gcite.stream.parser import Segment

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

_SUPERSCRIPT: Final = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MD_SPECIAL: Final = re.compile(r"([\\`*_\[\]<>#|!])")

ICON_CLASS: Final = {"rag": "fa-file-lines", "web": "fa-globe"}
SOURCE_LABEL: Final = {"rag": "知识库", "web": "网页"}


def _esc(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def superscript(n: int) -> str:
    """``n`` in Unicode superscript digits: ``12`` -> ``"¹²"``."""
    return str(n).translate(_SUPERSCRIPT)


#: Between two adjacent citations: ``¹˒²`` reads "1 and 2", ``¹²`` would read "twelve".
CITE_SEPARATOR: Final = "˒"


def _with_superscripts(segments: Iterable[Segment], clean: bool = False) -> str:
    """Text segments as written (control characters removed when ``clean``), each
    citation as superscript digits, adjacent citations separated by ``˒``; reasoning
    segments are left out."""
    out: list[str] = []
    previous_cite = False
    for seg in segments:
        if "text" in seg:
            out.append(clean_terminal(seg["text"]) if clean else seg["text"])
            previous_cite = False
        elif "cite" in seg:
            out.append((CITE_SEPARATOR if previous_cite else "") + superscript(int(seg["idx"])))
            previous_cite = True
    return "".join(out)


@lru_cache(maxsize=1)
def _markdown_parser() -> MarkdownIt:
    """CommonMark with GFM tables and strikethrough, raw HTML off (markdown-it-py)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def _close_open_fence(body: str) -> str:
    """``body`` with its last code fence closed when the answer ended inside it (so text
    appended after it is not swallowed by the code block)."""
    tokens = _markdown_parser().parse(body)
    fences = [t for t in tokens if t.type == "fence" and t.map is not None]
    if not fences:
        return body
    last = fences[-1]
    lines = body.split("\n")
    assert last.map is not None
    start, end = last.map
    if end < len(lines):
        return body
    closing = lines[end - 1].strip().lstrip(">").strip() if end - 1 > start else ""
    mark = last.markup[:1]
    closed = bool(closing) and set(closing) == {mark} and len(closing) >= len(last.markup)
    return body if closed else body + "\n" + last.markup


def _source_type(chunk: dict[str, Any] | None) -> str:
    if chunk is None:
        return ""
    value = chunk.get("source_type")
    return value if isinstance(value, str) else ""


# The panel rules and the URL rule are the stream contract's (docs/stream-contract.md).
_title = entry_title
_subtitle = entry_subtitle
_url = entry_url


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
    """The answer as Markdown (citation-markers.md §7) with its sources.

    The answer text is kept as written (it is Markdown already); each citation is a
    Unicode superscript in place (``一次¹。``, adjacent ones ``¹˒²``), so a marker never
    becomes Markdown syntax: ``[C:1](url)`` is not a link, a line starting ``[C:2]:`` is
    not a definition, the model's own ``[^1]`` stays the model's, a citation in image alt
    text stays alt text. Reasoning segments are left out. After a blank line comes
    ``来源：`` and one numbered line per display index, ``N. [title](<url>) · subtitle``,
    titles and subtitles escaped, links only for http(s) URLs; a cited index missing from
    ``panel`` gets ``来源 <raw id>``. A code fence left open by the answer is closed first.
    """
    items = list(segments)
    body = _with_superscripts(items)
    cited: dict[int, str] = {}
    for seg in items:
        if "cite" in seg:
            cited.setdefault(int(seg["idx"]), seg["cite"])
    entries = {int(e["idx"]): e for e in panel}
    for idx, raw_id in cited.items():
        entries.setdefault(idx, {"idx": idx, "raw_id": raw_id, "chunk": None})
    if not entries:
        return body
    notes: list[str] = []
    for idx in sorted(entries):
        entry = entries[idx]
        title = _md_inline(_title(entry))
        url = _url(entry)
        linkable = url is not None and "<" not in url and ">" not in url
        line = f"{idx}. " + (f"[{title}](<{url}>)" if linkable else title)
        subtitle = _subtitle(entry)
        if subtitle:
            line += f" · {_md_inline(subtitle)}"
        notes.append(line)
    body = _close_open_fence(body.rstrip("\n"))
    return body + "\n\n来源：\n\n" + "\n".join(notes) + "\n"


# -- copy text (tests/vectors/copy-text.v1.json) ---------------------------------------

_FENCE: Final = re.compile(r"^\s*(`{3,}|~{3,})")
_TABLE_RULE: Final = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_THEMATIC: Final = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_LINE_RULES: Final = (
    (re.compile(r"^\s{0,3}#{1,6}\s+"), ""),
    (re.compile(r"^(\s{0,3}>\s?)+"), ""),
    (re.compile(r"^(\s*)[-*+]\s+\[[ xX]\]\s+"), r"\1"),
    (re.compile(r"^(\s*)[-*+]\s+"), r"\1• "),
    (re.compile(r"!\[([^\]]*)\]\(([^()\s]*)\)"), r"\1"),
    (re.compile(r"\[([^\]]+)\]\((https?://[^()\s]+)\)"), r"\1（\2）"),
    (re.compile(r"\[([^\]]+)\]\(([^()\s]*)\)"), r"\1"),
    (re.compile(r"(\*\*|__)(?=\S)([\s\S]*?\S)\1"), r"\2"),
    (re.compile(r"(^|[^\w*])\*(?=\S)([^*]*?\S)\*(?!\w)", re.ASCII), r"\1\2"),
    (re.compile(r"~~(?=\S)([\s\S]*?\S)~~"), r"\1"),
    (re.compile(r"`([^`]+)`"), r"\1"),
)
_TABLE_ROW: Final = re.compile(r"^\s*\|.*\|\s*$")


def _plain_line(line: str) -> str | None:
    """One Markdown line as plain text (``None``: the line is dropped)."""
    if _FENCE.match(line):
        return None
    if _TABLE_RULE.match(line) and "-" in line and "|" in line:
        return None
    if _THEMATIC.match(line):
        return ""
    for pattern, repl in _LINE_RULES:
        line = pattern.sub(repl, line)
    if _TABLE_ROW.match(line):
        cells = line.strip().removeprefix("|").removesuffix("|").split("|")
        line = "\t".join(cell.strip() for cell in cells)
    return line


def copy_text(segments: Iterable[Segment], panel: Sequence[PanelEntry]) -> str:
    """The copy text of an answer (``copyText`` in ``clients/js/src/sources.js``).

    The answer as plain text — Markdown syntax removed line by line (headings, quotes,
    bullets as ``•``, fences, table rules; emphasis, code, images; an http(s) link as
    ``text（url）``), reasoning left out, each citation ``[N]``, control characters
    removed — then a blank line, ``来源：`` and one line per source
    ``[N] 标题 · 副标题 https://…`` (a cited index missing from ``panel`` gets
    ``来源 <raw id>``).
    """
    body: list[str] = []
    cited: list[tuple[int, str]] = []
    for seg in segments:
        if "cite" in seg:
            body.append(f"[{int(seg['idx'])}]")
            cited.append((int(seg["idx"]), str(seg["cite"])))
        elif "text" in seg:
            body.append(seg["text"])
    lines = []
    for line in _CONTROL.sub("", "".join(body)).split("\n"):
        plain = _plain_line(line)
        if plain is not None:
            lines.append(plain.rstrip())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
    rows: dict[int, PanelEntry] = {}
    for entry in panel:
        rows.setdefault(int(entry["idx"]), entry)
    for idx, raw_id in cited:
        rows.setdefault(idx, {"idx": idx, "raw_id": raw_id, "chunk": None})
    if not rows:
        return text
    out = []
    for idx in sorted(rows):
        entry = rows[idx]
        subtitle = _subtitle(entry)
        url = _url(entry)
        line = f"[{idx}] " + " ".join(_title(entry).split())
        line += (f" · {subtitle}" if subtitle else "") + (f" {url}" if url else "")
        out.append(_CONTROL.sub("", line))
    return text + "\n\n来源：\n" + "\n".join(out)


# -- terminal -------------------------------------------------------------------------


def clean_terminal(text: str) -> str:
    """``text`` without control characters (keeps newlines and tabs)."""
    return _CONTROL.sub("", text)


def render_terminal(segments: Iterable[Segment]) -> str:
    """The answer for a terminal: control characters removed, citations as superscripts,
    adjacent ones separated (``¹˒²``, not ``¹²``)."""
    return _with_superscripts(segments, clean=True)


class MarkdownBlocks:
    """Cuts a streaming answer into complete top-level Markdown blocks (for rich).

    :meth:`feed` takes parser segments and returns the Markdown source of the blocks
    that became complete (a block is complete once the next top-level block started);
    :meth:`close` returns the rest. Citations are superscripts in place (as
    :func:`render_terminal`), control characters are removed, reasoning is left out.
    Work per call is proportional to the open block, not to the answer: completed
    blocks are dropped from the source. ``open`` is the source of the open block.
    """

    def __init__(self) -> None:
        self.open = ""
        self._previous_cite = False

    def feed(self, segments: Iterable[Segment]) -> list[str]:
        """Blocks completed by ``segments`` (Markdown source, each ending in a newline)."""
        for seg in segments:
            if "text" in seg:
                self.open += clean_terminal(seg["text"])
                self._previous_cite = False
            elif "cite" in seg:
                sep = CITE_SEPARATOR if self._previous_cite else ""
                self.open += sep + superscript(int(seg["idx"]))
                self._previous_cite = True
        tokens = _markdown_parser().parse(self.open)
        starts = [t.map[0] for t in tokens if t.level == 0 and t.nesting != -1 and t.map]
        if len(starts) < 2:
            return []
        lines = self.open.split("\n")
        done = "\n".join(lines[: starts[-1]])
        self.open = "\n".join(lines[starts[-1] :])
        return [done.rstrip("\n") + "\n"] if done.strip() else []

    def close(self) -> list[str]:
        """The rest of the answer (``[]`` when nothing is left)."""
        rest, self.open = self.open, ""
        return [rest.rstrip("\n") + "\n"] if rest.strip() else []


def render_sources_terminal(panel: Sequence[PanelEntry]) -> str:
    """The numbered source list for a terminal (``""`` when nothing was cited).

    One line per entry, ``N. [知识库|网页] title — subtitle``, rows that look alike (same
    title and subtitle) followed by their segment hint (``（第 2 段 · “…”）``, the
    client rule :func:`gcite.stream.panel.source_rows`), then the http(s) URL indented on
    the next line when there is one.
    """
    if not panel:
        return ""
    lines = ["来源："]
    for entry, row in zip(panel, source_rows(panel), strict=True):
        label = SOURCE_LABEL.get(_source_type(entry["chunk"]), "来源")
        line = f"{int(entry['idx'])}. [{label}] {clean_terminal(' '.join(_title(entry).split()))}"
        subtitle = clean_terminal(" ".join(_subtitle(entry).split()))
        if subtitle:
            line += f" — {subtitle}"
        if row["hint"]:
            line += f"（{clean_terminal(row['hint'])}）"
        lines.append(line)
        url = _url(entry)
        if url is not None:
            lines.append(f"   {url}")
    return "\n".join(lines) + "\n"
