"""The UnifiedChunk schema and the web subtitle rule of the merge node.

Seed: platform design document §3.4 (UnifiedChunk fields), §3.6 (the 4-level
``display_subtitle`` fallback chain) and Appendix A (``_extract_host``,
``_normalize_date``).

Standard library only: this module is inlined into the exported Dify Code node
(:mod:`gcite.dify.codenode`), so it must not import anything from ``gcite`` and
its top-level names must not clash with those of :mod:`gcite.envelopes` and
:mod:`gcite.merge`.
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Any, TypedDict
from urllib.parse import urlsplit

#: Separator between site and date in ``display_subtitle`` (seed §3.6: "知乎 · 2025-08-12").
SUBTITLE_SEPARATOR = " · "


class UnifiedChunk(TypedDict):
    """One chunk of the merge node's ``chunk_metadata`` (seed §3.4), RAG or web alike.

    Every field is always present (empty string, ``0`` or ``0.0`` when unknown),
    so downstream code never needs ``.get``.

    Core fields (shown by clients): ``id`` (global number as a string, "1".."N"),
    ``source_type`` ("rag" | "web"), ``content``, ``document_title``, ``url``,
    ``score`` (finite float; similarity for RAG, relevance for web) and
    ``display_subtitle`` (dataset name for RAG, §3.6 fallback chain for web).

    Extended fields (debugging / provenance): ``document_name`` (file name for
    RAG, the URL for web), ``dataset_name`` (RAG), ``site_name`` / ``site_host``
    (web), ``source_file_url``, ``segment_position`` (int, RAG) and
    ``published_date`` (YYYY-MM-DD, web).

    gcite extension, so the chat service can build Dify ``retriever_resources``:
    ``dataset_id``, ``document_id``, ``segment_id`` (RAG; empty for web).
    """

    id: str
    source_type: str
    content: str
    document_title: str
    url: str
    score: float
    display_subtitle: str
    document_name: str
    dataset_name: str
    site_name: str
    site_host: str
    source_file_url: str
    segment_position: int
    published_date: str
    dataset_id: str
    document_id: str
    segment_id: str


class WebChunk(TypedDict):
    """The standard web chunk every provider item is mapped to (seed §3.2.2 and §4).

    ``title``, ``url``, ``content`` (snippet / content / summary), ``site_name``,
    ``published_date`` (YYYY-MM-DD or "") and ``score`` (finite float, 0.0 when
    the provider gives none). Produced by :func:`gcite.envelopes.to_web_chunk`.
    """

    title: str
    url: str
    content: str
    site_name: str
    published_date: str
    score: float


def as_text(value: Any) -> str:
    """Coerce a payload value to text: ``str`` as is, finite numbers via ``str()``, else "".

    Booleans, ``None``, containers, non-finite floats and integers too long to
    print give "" (they are not text a user could read as a title, URL or content).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    try:
        return str(value)
    except ValueError:  # an int beyond sys.get_int_max_str_digits()
        return ""


def as_score(value: Any) -> float | None:
    """Parse a score: int, float or numeric string, finite only; ``None`` when unusable.

    ``True``/``False``, ``NaN``, ``±inf``, integers beyond the float range and
    non-numeric strings give ``None``.
    """
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str):
            number = float(value.strip())
        else:
            return None
    except (OverflowError, ValueError):  # an int too large for a float, a non-numeric string
        return None
    return number if math.isfinite(number) else None


_WHITESPACE = re.compile(r"\s")


def extract_host(url: str) -> str:
    """Host of ``url`` in lower case without a leading ``www.`` (seed Appendix A ``_extract_host``).

    ``"https://www.zhihu.com/question/1"`` → ``"zhihu.com"``. A URL given without
    a scheme (``"www.zhihu.com/q/1"``) is read as ``//www.zhihu.com/q/1``. Ports and
    credentials are dropped. Anything unparsable, or a "host" with whitespace,
    gives "" (never raises).
    """
    text = url.strip() if isinstance(url, str) else ""
    if not text:
        return ""
    if "//" not in text:
        text = "//" + text
    try:
        host = urlsplit(text).hostname or ""
    except ValueError:
        return ""
    if _WHITESPACE.search(host):
        return ""
    if host.startswith("www."):
        host = host[4:]
    return host


_DATE_YMD = re.compile(r"(?<!\d)(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})")
_ISO_PREFIX = re.compile(r"\d{4}-\d{2}-\d{2}(?!\d)")
_DATE_COMPACT = re.compile(r"(\d{4})(\d{2})(\d{2})")
_DATE_RFC2822 = re.compile(r"(?<!\d)(\d{1,2})\s+([A-Za-z]{3})[a-z]*\.?\s+(\d{4})(?!\d)")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _valid_ymd(year: str, month: str, day: str) -> str:
    try:
        return datetime.date(int(year), int(month), int(day)).isoformat()
    except ValueError:
        return ""


def normalize_date(raw: Any) -> str:
    """Normalise a provider date to ``YYYY-MM-DD``; "" when there is none or it is unreadable.

    Accepts ISO dates and date-times (``2024-07-22T17:54:38+08:00``, Baidu's
    ``2026-05-27 12:35:55``), ``2025/08/12``, ``2025.8.12``, ``2025年8月12日``,
    ``20250812`` and RFC 2822 (``Mon, 25 Nov 2024 14:32:00 GMT``, Tavily news;
    also ``25 November 2024``).
    The calendar date is taken as written, with no time-zone conversion: Bocha's
    ``dateLastCrawled`` is local (UTC+8) time despite its ``Z`` suffix
    (dify-protocol.md §6). Impossible dates (``2025-02-30``) give "".
    """
    text = (raw if isinstance(raw, str) else as_text(raw)).strip()
    if not text:
        return ""
    if _ISO_PREFIX.match(text):  # fast path: 2025-08-12, 2025-08-12T…, 2025-08-12 12:35:55
        try:
            return datetime.date.fromisoformat(text[:10]).isoformat()
        except ValueError:
            return ""
    match = _DATE_YMD.search(text)
    if match:
        return _valid_ymd(*match.groups())
    match = _DATE_COMPACT.fullmatch(text)
    if match:
        return _valid_ymd(*match.groups())
    match = _DATE_RFC2822.search(text)
    if match and match.group(2).lower() in _MONTHS:
        month = _MONTHS.index(match.group(2).lower()) + 1
        return _valid_ymd(match.group(3), str(month), match.group(1))
    return ""


def display_subtitle(site_name: str, url: str, published_date: str) -> str:
    """The web subtitle by the seed's 4-level fallback chain (platform design §3.6).

    1. site name and date: ``"知乎 · 2025-08-12"``;
    2. no site name: the URL's host without ``www.``: ``"zhihu.com · 2025-08-12"``;
    3. no host either: the date alone: ``"2025-08-12"``;
    4. nothing: ``""`` (the client renders no subtitle line).

    A level with only the site (no date) gives the site alone (``"知乎"``).
    Arguments are plain strings; surrounding whitespace is ignored.
    """
    site = (site_name.strip() if isinstance(site_name, str) else "") or extract_host(url)
    date = published_date.strip() if isinstance(published_date, str) else ""
    if site and date:
        return site + SUBTITLE_SEPARATOR + date
    return site or date


def empty_chunk(source_type: str) -> UnifiedChunk:
    """A UnifiedChunk of ``source_type`` with every field at its empty default."""
    return {
        "id": "",
        "source_type": source_type,
        "content": "",
        "document_title": "",
        "url": "",
        "score": 0.0,
        "display_subtitle": "",
        "document_name": "",
        "dataset_name": "",
        "site_name": "",
        "site_host": "",
        "source_file_url": "",
        "segment_position": 0,
        "published_date": "",
        "dataset_id": "",
        "document_id": "",
        "segment_id": "",
    }


__all__ = [
    "SUBTITLE_SEPARATOR",
    "UnifiedChunk",
    "WebChunk",
    "as_score",
    "as_text",
    "display_subtitle",
    "empty_chunk",
    "extract_host",
    "normalize_date",
]
