"""Heading-aware chunking for Chinese text and law-style articles.

Rules (issue 4 item 1), all sizes in characters:

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
  of the previous piece. Whole articles are never repeated.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_CN_NUM = "零〇一二三四五六七八九十百千万两0-9０-９"
ARTICLE_RE = re.compile(rf"^\s*(第[{_CN_NUM}]+条(?:之[{_CN_NUM}]+)?)(?=[\s　:：]|$)")
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_COMMENT_RE = re.compile(r"<!--.*?-->", re.S)
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


@dataclass
class _Section:
    headings: list[str]
    blocks: list[_Unit] = field(default_factory=list)


def split_sentences(text: str) -> list[str]:
    """Split at sentence ends, keeping the punctuation; empty pieces dropped."""
    return [s for s in _SENTENCE_RE.findall(text) if s.strip()]


def _sections(text: str) -> list[_Section]:
    text = _COMMENT_RE.sub("", text)
    stack: list[tuple[int, str]] = []
    sections: list[_Section] = [_Section(headings=[])]
    current: _Unit | None = None
    paragraph: list[str] = []

    def flush_paragraph() -> None:
        nonlocal paragraph
        body = "\n".join(paragraph).strip()
        paragraph = []
        if not body:
            return
        if current is not None:
            current.text += "\n" + body
        else:
            sections[-1].blocks.append(_Unit(body, [], False))

    for line in text.split("\n"):
        heading = _HEADING_RE.match(line)
        if heading:
            flush_paragraph()
            current = None
            level = len(heading.group(1))
            stack = [(lv, t) for lv, t in stack if lv < level]
            stack.append((level, heading.group(2).strip()))
            sections.append(_Section(headings=[t for _, t in stack]))
            continue
        article = ARTICLE_RE.match(line)
        if article:
            flush_paragraph()
            current = _Unit(line.strip(), [article.group(1)], True)
            sections[-1].blocks.append(current)
            continue
        if not line.strip():
            flush_paragraph()
            continue
        paragraph.append(line.rstrip())
    flush_paragraph()
    return [s for s in sections if s.blocks]


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


def chunk_text(text: str, *, chunk_size: int = 600, chunk_overlap: int = 80) -> list[Chunk]:
    """Cut ``text`` (Markdown-ish) into chunks; see the module docstring for the rules.

    ``chunk_size`` > 0 and 0 <= ``chunk_overlap`` < ``chunk_size`` (characters of
    body text; the breadcrumb line is extra). Raises ``ValueError`` otherwise.
    """
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError("chunk_overlap must be >= 0 and smaller than chunk_size")
    chunks: list[Chunk] = []
    for section in _sections(text):
        units: list[_Unit] = []
        for block in section.blocks:
            if len(block.text) <= chunk_size:
                units.append(block)
            else:
                units.extend(_cut(block, chunk_size, chunk_overlap))
        bodies: list[tuple[str, list[str]]] = []
        buf: list[_Unit] = []
        for unit in units:
            length = sum(len(u.text) + 1 for u in buf)
            if buf and length + len(unit.text) > chunk_size:
                bodies.append(("\n".join(u.text for u in buf), _articles(buf)))
                last = buf[-1]
                buf = []
                if chunk_overlap and not last.is_article and not unit.is_article:
                    tail = _tail(split_sentences(last.text), chunk_overlap)
                    if tail and len(tail) + len(unit.text) < chunk_size and tail != unit.text:
                        buf.append(_Unit(tail.strip(), [], False))
            buf.append(unit)
        if buf:
            bodies.append(("\n".join(u.text for u in buf), _articles(buf)))
        crumb = " > ".join(section.headings)
        for body, articles in bodies:
            chunks.append(
                Chunk(
                    text=f"{crumb}\n{body}" if crumb else body,
                    position=len(chunks) + 1,
                    headings=list(section.headings),
                    articles=articles,
                )
            )
    return chunks


def _articles(units: list[_Unit]) -> list[str]:
    seen: list[str] = []
    for unit in units:
        for article in unit.articles:
            if article not in seen:
                seen.append(article)
    return seen


__all__ = ["ARTICLE_RE", "Chunk", "chunk_text", "split_sentences"]
