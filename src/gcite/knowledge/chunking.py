"""Heading-aware chunking for Chinese text and law-style articles.

Rules, all sizes in characters:

* Markdown headings are never separated from their text: a chunk never spans
  two heading sections, and its ``headings`` (the breadcrumb of enclosing
  headings) is written as the first line of the chunk's ``text``.
* A law article (a line starting ``第X条``) with its following paragraphs is one
  unit and stays whole in one chunk when it fits ``chunk_size``; several short
  articles of the same section are packed together.
* Longer units are cut at Chinese/ASCII sentence ends (。！？；!?; and line
  breaks); a sentence longer than ``chunk_size`` is cut hard.
* ``chunk_overlap``: consecutive pieces of one cut unit, and consecutive chunks
  of plain prose, repeat up to that many trailing characters (whole sentences)
  of the previous piece. Whole articles and tables are never repeated.
* A Markdown table (consecutive ``|`` lines, the second a ``---`` separator)
  is one block; a table longer than ``chunk_size`` is cut between rows and every
  piece starts with the header row and the separator.
* The breadcrumb is bounded: each heading at most 60 characters, the whole line
  at most 160 (outer headings give way to ``…``).

:func:`iter_chunks` does the same on a stream of lines with bounded memory
(used for large files); :func:`chunk_text` is it on a string.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

_CN_NUM = "零〇一二三四五六七八九十百千万两0-9０-９"
ARTICLE_RE = re.compile(rf"^\s*(第[{_CN_NUM}]+条(?:之[{_CN_NUM}]+)?)(?=[\s　:：]|$)")
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SENTENCE_RE = re.compile(r"[^。！？!?；;\n]*(?:[。！？!?；;]+[”’」』）)]*|\n|$)")


@dataclass
class Chunk:
    """One chunk: ``text`` (breadcrumb line + body), ``headings``, ``articles``.

    ``position`` is 1-based within the document (Dify ``segment_position``).
    ``articles`` lists the law articles (``第X条``) whose text the chunk holds.
    """

    text: str
    position: int
    headings: list[str] = field(default_factory=list)
    articles: list[str] = field(default_factory=list)


@dataclass
class _Unit:
    text: str
    articles: list[str]
    is_article: bool


def split_sentences(text: str) -> list[str]:
    """Split at sentence ends, keeping the punctuation; empty pieces dropped."""
    return [s for s in _SENTENCE_RE.findall(text) if s.strip()]


def _tail(sentences: list[str], overlap: int) -> str:
    out = ""
    for sentence in reversed(sentences):
        if len(out) + len(sentence) > overlap:
            break
        out = sentence + out
    return out


def _cut(unit: _Unit, size: int, overlap: int) -> list[_Unit]:
    """Cut one over-long unit at sentence ends into pieces of at most ``size``."""
    sentences: list[str] = []
    for sentence in split_sentences(unit.text):
        while len(sentence) > size:
            sentences.append(sentence[:size])
            sentence = sentence[size:]
        sentences.append(sentence)
    pieces: list[_Unit] = []
    buf: list[str] = []
    for sentence in sentences:
        if buf and len("".join(buf)) + len(sentence) > size:
            pieces.append(_Unit("".join(buf).strip(), list(unit.articles), False))
            tail = _tail(buf, overlap) if overlap else ""
            buf = [tail] if tail and len(tail) + len(sentence) <= size else []
        buf.append(sentence)
    if "".join(buf).strip():
        pieces.append(_Unit("".join(buf).strip(), list(unit.articles), False))
    return pieces


def _is_table(text: str) -> bool:
    lines = text.split("\n")
    return len(lines) >= 2 and all(line.startswith("|") for line in lines) and "---" in lines[1]


def _cut_table(unit: _Unit, size: int) -> list[_Unit]:
    """Cut a long Markdown table by rows; every piece repeats the header and separator."""
    lines = unit.text.split("\n")
    head = "\n".join(lines[:2])
    pieces: list[_Unit] = []
    rows: list[str] = []
    length = len(head)
    for row in lines[2:]:
        if len(row) > size:  # a row longer than a chunk: cut hard, still under the header
            row = row[: max(size - len(head) - 1, 1)]
        if rows and length + 1 + len(row) > size:
            pieces.append(_Unit(head + "\n" + "\n".join(rows), list(unit.articles), False))
            rows, length = [], len(head)
        rows.append(row)
        length += 1 + len(row)
    if rows:
        pieces.append(_Unit(head + "\n" + "\n".join(rows), list(unit.articles), False))
    return pieces


def bounded(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)] + "…"


MAX_HEADING_CHARS = 60
MAX_CRUMB_CHARS = 160


def breadcrumb(headings: list[str]) -> str:
    """The chunk's first line: headings joined by `` > ``, each cut to
    :data:`MAX_HEADING_CHARS`, the outermost dropped (``… > ``) beyond
    :data:`MAX_CRUMB_CHARS`."""
    parts = [bounded(h, MAX_HEADING_CHARS) for h in headings]
    lead: list[str] = []
    while len(parts) > 1 and len(" > ".join(lead + parts)) > MAX_CRUMB_CHARS:
        parts, lead = parts[1:], ["…"]
    return bounded(" > ".join(lead + parts), MAX_CRUMB_CHARS)


class _Chunker:
    """The streaming state machine behind :func:`iter_chunks` (one line at a time)."""

    def __init__(self, size: int, overlap: int) -> None:
        self.size = size
        self.overlap = overlap
        self.max_block = max(8 * size, 4096)
        self.stack: list[tuple[int, str]] = []
        self.headings: list[str] = []
        self.current: _Unit | None = None
        self.paragraph: list[str] = []
        self.paragraph_len = 0
        self.buf: list[_Unit] = []
        self.out: list[Chunk] = []
        self.position = 0
        self.in_comment = False

    # -- lines -------------------------------------------------------------

    def feed(self, line: str) -> None:
        stripped = self._strip_comments(line)
        if stripped is None:
            return
        line = stripped
        heading = _HEADING_RE.match(line)
        if heading:
            self._flush_paragraph()
            self._close_unit()
            self._flush_section()
            level = len(heading.group(1))
            self.stack = [(lv, t) for lv, t in self.stack if lv < level]
            self.stack.append((level, heading.group(2).strip()))
            self.headings = [t for _, t in self.stack]
            return
        article = ARTICLE_RE.match(line)
        if article:
            self._flush_paragraph()
            self._close_unit()
            self.current = _Unit(line.strip(), [article.group(1)], True)
            return
        if not line.strip():
            self._flush_paragraph()
            return
        if self.paragraph and line.startswith("|") != self.paragraph[-1].startswith("|"):
            self._flush_paragraph()  # a table starts or ends: its own block
        self.paragraph.append(line.rstrip())
        self.paragraph_len += len(line) + 1
        if self.paragraph_len > self.max_block:
            self._flush_paragraph(partial=True)

    def finish(self) -> None:
        self._flush_paragraph()
        self._close_unit()
        self._flush_section()

    def _strip_comments(self, line: str) -> str | None:
        out = ""
        rest = line
        while rest:
            if self.in_comment:
                end = rest.find("-->")
                if end < 0:
                    return out if out.strip() else None
                rest = rest[end + 3 :]
                self.in_comment = False
            else:
                begin = rest.find("<!--")
                if begin < 0:
                    return out + rest
                out += rest[:begin]
                rest = rest[begin + 4 :]
                self.in_comment = True
        return out

    # -- blocks ------------------------------------------------------------

    def _flush_paragraph(self, partial: bool = False) -> None:
        body = "\n".join(self.paragraph).strip()
        self.paragraph, self.paragraph_len = [], 0
        if not body:
            return
        if partial and not _is_table(body):
            # keep the unfinished last sentence for the next lines
            sentences = split_sentences(body)
            if len(sentences) > 1 and not re.search(r"[。！？!?；;\n]\s*$", sentences[-1]):
                tail = sentences.pop()
                body = "".join(sentences).strip()
                self.paragraph, self.paragraph_len = [tail], len(tail)
        if self.current is not None and not _is_table(body):
            self.current.text += "\n" + body
            if len(self.current.text) > self.max_block:  # an endless article: emit what we have
                self._close_unit()
            return
        self._close_unit()
        self._add(_Unit(body, [], False))

    def _close_unit(self) -> None:
        if self.current is not None:
            unit, self.current = self.current, None
            self._add(unit)

    def _add(self, block: _Unit) -> None:
        if len(block.text) <= self.size:
            units = [block]
        elif _is_table(block.text):
            units = _cut_table(block, self.size)
        else:
            units = _cut(block, self.size, self.overlap)
        for unit in units:
            length = sum(len(u.text) + 1 for u in self.buf)
            if self.buf and length + len(unit.text) > self.size:
                last = self.buf[-1]
                self._emit()
                if (
                    self.overlap
                    and not last.is_article
                    and not unit.is_article
                    and not _is_table(last.text)
                    and not _is_table(unit.text)
                ):
                    tail = _tail(split_sentences(last.text), self.overlap)
                    if tail and len(tail) + len(unit.text) < self.size and tail != unit.text:
                        self.buf.append(_Unit(tail.strip(), [], False))
            self.buf.append(unit)

    def _emit(self) -> None:
        if not self.buf:
            return
        body = "\n".join(u.text for u in self.buf)
        articles = _articles(self.buf)
        self.buf = []
        crumb = breadcrumb(self.headings)
        self.position += 1
        self.out.append(
            Chunk(
                text=f"{crumb}\n{body}" if crumb else body,
                position=self.position,
                headings=list(self.headings),
                articles=articles,
            )
        )

    def _flush_section(self) -> None:
        self._emit()


def iter_chunks(
    lines: Iterable[str], *, chunk_size: int = 600, chunk_overlap: int = 80
) -> Iterator[Chunk]:
    """Chunks of a stream of lines (no trailing newlines needed), as soon as each is complete.

    Same rules and errors as :func:`chunk_text`; memory is bounded by a few
    ``chunk_size`` (a paragraph or an article longer than ``8 * chunk_size``
    characters, or 4096, is emitted in parts), so a file of any size can be
    chunked while it is read.
    """
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError("chunk_overlap must be >= 0 and smaller than chunk_size")
    chunker = _Chunker(chunk_size, chunk_overlap)
    for raw in lines:
        chunker.feed(raw.rstrip("\r\n"))
        if chunker.out:
            yield from chunker.out
            chunker.out = []
    chunker.finish()
    yield from chunker.out


def chunk_text(text: str, *, chunk_size: int = 600, chunk_overlap: int = 80) -> list[Chunk]:
    """Cut ``text`` (Markdown-ish) into chunks; see the module docstring for the rules.

    ``chunk_size`` > 0 and 0 <= ``chunk_overlap`` < ``chunk_size`` (characters of
    body text; the breadcrumb line is extra). Raises ``ValueError`` otherwise.
    """
    return list(iter_chunks(text.split("\n"), chunk_size=chunk_size, chunk_overlap=chunk_overlap))


def _articles(units: list[_Unit]) -> list[str]:
    seen: list[str] = []
    for unit in units:
        for article in unit.articles:
            if article not in seen:
                seen.append(article)
    return seen


__all__ = [
    "ARTICLE_RE",
    "MAX_CRUMB_CHARS",
    "MAX_HEADING_CHARS",
    "Chunk",
    "bounded",
    "breadcrumb",
    "chunk_text",
    "iter_chunks",
    "split_sentences",
]
