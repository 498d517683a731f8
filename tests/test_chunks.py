"""UnifiedChunk helpers: the §3.6 subtitle fallback chain, host extraction, date normalisation."""

from __future__ import annotations

import math
from typing import Any, get_type_hints

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gcite.chunks import (
    UnifiedChunk,
    as_score,
    as_text,
    display_subtitle,
    empty_chunk,
    extract_host,
    normalize_date,
)

# Platform design §3.6 "降级链演示" table: (site_name, published_date, URL with that host, subtitle)
SEED_3_6_TABLE = [
    ("知乎", "2025-08-12", "https://www.zhihu.com/question/123", "知乎 · 2025-08-12"),  # Bocha
    ("", "2025-08-12", "https://www.zhihu.com/question/123", "zhihu.com · 2025-08-12"),  # Tavily
    ("知乎", "", "https://www.zhihu.com/question/123", "知乎"),  # Baidu ordinary, no date
    ("", "", "https://example.com/a", "example.com"),  # bare URL
    ("", "", "", ""),  # no URL at all
]


@pytest.mark.parametrize(("site", "date", "url", "expected"), SEED_3_6_TABLE)
def test_seed_fallback_table_rows(site: str, date: str, url: str, expected: str) -> None:
    assert display_subtitle(site, url, date) == expected


def test_seed_fallback_table_hosts() -> None:
    # The table's host column: zhihu.com (www. removed), example.com, "".
    assert [extract_host(url) for _, _, url, _ in SEED_3_6_TABLE] == [
        "zhihu.com",
        "zhihu.com",
        "zhihu.com",
        "example.com",
        "",
    ]


def test_level_three_date_alone_when_no_host() -> None:
    # §3.6 level 3: neither site name nor host, only the date.
    assert display_subtitle("", "", "2025-08-12") == "2025-08-12"
    assert display_subtitle("  ", "not a url at all", "2025-08-12") == "2025-08-12"
    assert display_subtitle("", "http://[::1/broken", "2025-08-12") == "2025-08-12"


def test_subtitle_strips_whitespace_and_ignores_wrong_types() -> None:
    assert display_subtitle("  知乎 ", "", " 2025-08-12 ") == "知乎 · 2025-08-12"
    assert display_subtitle(None, None, None) == ""  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://www.zhihu.com/question/123/answer/456", "zhihu.com"),
        ("http://WWW.Example.COM:8080/path?q=1", "example.com"),
        ("https://user:secret@blog.csdn.net/x", "blog.csdn.net"),
        ("www.example.net/no-scheme", "example.net"),
        ("baike.baidu.com", "baike.baidu.com"),
        ("oss://kb-raw/2026/06/巡更.pdf", "kb-raw"),
        ("https://wwwx.example.com/", "wwwx.example.com"),
        ("http://[::1/broken", ""),
        ("   ", ""),
        ("", ""),
    ],
)
def test_extract_host(url: str, host: str) -> None:
    assert extract_host(url) == host


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2025-08-12", "2025-08-12"),
        ("2026-05-27 12:35:55", "2026-05-27"),  # Baidu (seed Appendix A)
        ("2024-07-22T17:54:38+08:00", "2024-07-22"),  # Bocha datePublished
        ("2024-07-22T23:54:38Z", "2024-07-22"),  # Bocha dateLastCrawled: no TZ shift
        ("Mon, 02 Mar 2026 06:15:00 GMT", "2026-03-02"),  # Tavily news
        ("2025/8/1", "2025-08-01"),
        ("2025.08.12", "2025-08-12"),
        ("2025年8月12日", "2025-08-12"),
        ("20250812", "2025-08-12"),
        ("  2025-08-12  ", "2025-08-12"),
        ("2025-02-30", ""),
        ("12345-06-07", ""),
        ("昨天", ""),
        ("", ""),
        (None, ""),
        (20250812, "2025-08-12"),
        (["2025-08-12"], ""),
    ],
)
def test_normalize_date(raw: Any, expected: str) -> None:
    assert normalize_date(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (0.73, 0.73),
        (1, 1.0),
        ("0.81", 0.81),
        (" 0.5 ", 0.5),
        ("high", None),
        (float("nan"), None),
        (float("inf"), None),
        ("-inf", None),
        ("NaN", None),
        (True, None),
        (None, None),
        ({"score": 1}, None),
        (10**400, None),
        ("1e999", None),
    ],
)
def test_as_score(raw: Any, expected: float | None) -> None:
    assert as_score(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("文本", "文本"),
        (2026, "2026"),
        (0.5, "0.5"),
        (True, ""),
        (None, ""),
        (math.nan, ""),
    ],
)
def test_as_text(raw: Any, expected: str) -> None:
    assert as_text(raw) == expected


def test_as_text_of_an_int_too_long_to_print() -> None:
    assert as_text(10**5000) == ""  # beyond Python's int-to-str digit limit


def test_empty_chunk_has_every_field_with_its_type() -> None:
    hints = get_type_hints(UnifiedChunk)
    chunk = empty_chunk("web")
    assert set(chunk) == set(hints)
    for name, kind in hints.items():
        assert isinstance(chunk[name], kind), name  # type: ignore[literal-required]
    assert chunk["source_type"] == "web"


@given(st.text(max_size=40), st.text(max_size=80), st.text(max_size=20))
def test_subtitle_never_raises_and_separates_only_present_parts(
    site: str, url: str, date: str
) -> None:
    subtitle = display_subtitle(site, url, date)
    assert isinstance(subtitle, str)
    assert not subtitle.startswith(" · ")
    assert not subtitle.endswith(" · ")
    if date.strip():
        assert subtitle.endswith(date.strip())
    if site.strip():
        assert subtitle.startswith(site.strip())
    if not site.strip() and not date.strip():
        assert subtitle == extract_host(url)
