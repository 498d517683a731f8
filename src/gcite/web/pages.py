"""Saved web pages on disk → records the offline web source can index and return.

A saved page is a Markdown (``.md``) or text (``.txt``) file with YAML front
matter::

    ---
    title: 物业巡检流程标准是怎样的？ - 问答社区
    url: https://www.wenda-forum.example/question/2871/answer/5530
    site_name: 问答社区
    published_date: 2025-08-12
    ---
    body text …

Fallbacks, so that no page is lost: no or broken front matter → the whole file
is the body and a warning is logged; no ``title`` → the first ``#`` heading,
else the file name; no ``url`` → the file's ``file://`` URI; other missing
fields → ``""``. Dates (YAML dates or strings) become ``YYYY-MM-DD`` strings
when they start with one, else are kept as written. Files above
:data:`MAX_PAGE_BYTES` are skipped with a warning.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

logger = logging.getLogger("gcite.web")

#: Largest saved page read, bytes.
MAX_PAGE_BYTES = 5 * 1024 * 1024
PAGE_SUFFIXES = (".md", ".markdown", ".txt")

_FRONT = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class SavedPage:
    """One saved web page: front-matter fields (strings) and its body text."""

    path: Path
    title: str
    url: str
    site_name: str
    published_date: str
    body: str


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value).strip()


def normalize_date(value: Any) -> str:
    """``YYYY-MM-DD`` for a YAML date/datetime or a string starting with one, else the text."""
    text = _text(value)
    match = _DATE.match(text)
    return match.group(0) if match else text


def split_front_matter(text: str) -> tuple[dict[str, Any] | None, str]:
    """(front matter as a dict, body); ``(None, text)`` when there is none or it is broken."""
    match = _FRONT.match(text)
    if match is None:
        return None, text
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None, text
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return None, text
    return data, text[match.end() :]


def parse_page(path: Path, text: str) -> SavedPage:
    """A :class:`SavedPage` from the file's ``text`` (see the module for the fallbacks)."""
    meta, body = split_front_matter(text)
    if meta is None:
        if text.lstrip("\ufeff").startswith("---"):
            logger.warning("saved page %s: unreadable front matter, indexed as plain text", path)
        meta = {}
    heading = _HEADING.search(body)
    title = _text(meta.get("title")) or (heading.group(1) if heading else "") or path.stem
    return SavedPage(
        path=path,
        title=title,
        url=_text(meta.get("url")) or path.resolve().as_uri(),
        site_name=_text(meta.get("site_name")),
        published_date=normalize_date(meta.get("published_date")),
        body=body.strip(),
    )


def load_pages(folder: Path) -> list[SavedPage]:
    """Every saved page under ``folder`` (recursive), sorted by relative path.

    Unreadable or oversized files are skipped with a warning; bytes that are
    not UTF-8 are replaced. Raises :class:`OSError` if ``folder`` cannot be
    listed.
    """
    pages: list[SavedPage] = []
    for path in sorted(folder.rglob("*")):
        if path.suffix.lower() not in PAGE_SUFFIXES or not path.is_file():
            continue
        try:
            if path.stat().st_size > MAX_PAGE_BYTES:
                logger.warning("saved page %s: above %d bytes, skipped", path, MAX_PAGE_BYTES)
                continue
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            logger.warning("saved page %s: unreadable (%s), skipped", path, exc)
            continue
        pages.append(parse_page(path, text))
    return pages


def split_passages(text: str, *, size: int = 400) -> list[str]:
    """The body cut into passages of about ``size`` characters, on paragraph boundaries.

    Paragraphs (blank-line separated) are packed together up to ``size``; a
    paragraph longer than ``size`` is cut into ``size``-character pieces.
    Empty text gives ``[]``.
    """
    passages: list[str] = []
    current = ""
    for raw in re.split(r"\n\s*\n", text):
        paragraph = raw.strip()
        if not paragraph:
            continue
        while len(paragraph) > size:
            if current:
                passages.append(current)
                current = ""
            passages.append(paragraph[:size])
            paragraph = paragraph[size:]
        if current and len(current) + 1 + len(paragraph) > size:
            passages.append(current)
            current = ""
        current = f"{current}\n{paragraph}" if current else paragraph
    if current:
        passages.append(current)
    return passages


__all__ = [
    "MAX_PAGE_BYTES",
    "PAGE_SUFFIXES",
    "SavedPage",
    "load_pages",
    "normalize_date",
    "parse_page",
    "split_front_matter",
    "split_passages",
]
