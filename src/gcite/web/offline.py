"""The offline web source: a local folder of saved pages answering like Bocha (issue 5, item 2).

So that the whole chatflow (web branch, merge node, citations, the source
panel's green web entries) runs with no network and no API key, a folder of
saved pages (see :mod:`gcite.web.pages` for the file format) stands in for a
web search provider. Results come back in **Bocha's payload shape**
(dify-protocol.md §6), so the merge node cannot tell the difference::

    {"code": 200, "log_id": "offline", "msg": null,
     "data": {"_type": "SearchResponse", "queryContext": {"originalQuery": q},
              "webPages": {"value": [
                 {"name": title, "url": url, "displayUrl": url,
                  "snippet": first 200 characters of the best passage,
                  "summary": the best passage (≈400 characters),
                  "siteName": site_name, "datePublished": published_date,
                  "score": relevance in (0, 1], …}]}}}

One result per page (its best passage), at most ``count`` results, best
first. ``score`` is an addition to Bocha's shape: the merge node uses it to
rank web chunks.

Search: passages of every page ranked by BM25 over jieba tokens
(:mod:`gcite.web.bm25`), scores divided by the best one. The index is built
on first use and rebuilt when a file in the folder is added, removed or
changed.

Errors: :class:`ConfigError` at construction when the folder does not exist;
:class:`SourceTimeout` when a search (including a rebuild) takes longer than
``timeout_s``; :class:`SourceUnavailable` when the folder vanished or cannot
be read. A blank query or ``count < 1`` returns the empty payload.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gcite.config import Settings
from gcite.errors import ConfigError, SourceTimeout, SourceUnavailable
from gcite.web.base import clamp_count, clean_query
from gcite.web.bm25 import Bm25Index
from gcite.web.pages import PAGE_SUFFIXES, SavedPage, load_pages, split_passages

#: Most results one offline search returns (as Bocha's ``count``).
MAX_COUNT = 50
SNIPPET_CHARS = 200

Fingerprint = tuple[tuple[str, int, int], ...]


def folder_fingerprint(folder: Path) -> Fingerprint:
    """(relative path, size, mtime ns) of every page file: changes when the folder does."""
    entries = []
    for path in sorted(folder.rglob("*")):
        if path.suffix.lower() in PAGE_SUFFIXES and path.is_file():
            stat = path.stat()
            entries.append((str(path.relative_to(folder)), stat.st_size, stat.st_mtime_ns))
    return tuple(entries)


@dataclass(frozen=True)
class Ranked:
    """One page's best passage and its relevance in ``(0, 1]``."""

    page: SavedPage
    passage: str
    score: float


class PageIndex:
    """BM25 over the passages of a list of pages; one best passage per page."""

    def __init__(self, pages: list[SavedPage], *, passage_chars: int = 400) -> None:
        self.pages = pages
        self._owners: list[int] = []
        passages: list[str] = []
        for i, page in enumerate(pages):
            # The title is searchable too: pages are often found by their headline.
            for passage in split_passages(page.body, size=passage_chars) or [""]:
                self._owners.append(i)
                passages.append(passage)
        self._passages = passages
        texts = [f"{pages[o].title}\n{p}" for o, p in zip(self._owners, passages, strict=True)]
        self._bm25 = Bm25Index(texts)

    def rank(self, query: str, count: int) -> list[Ranked]:
        """At most ``count`` pages for ``query``, best first, scores scaled to ``(0, 1]``."""
        hits = self._bm25.search(query, top_k=len(self._bm25))
        best: dict[int, Ranked] = {}
        top = hits[0].score if hits else 1.0
        for hit in hits:
            owner = self._owners[hit.index]
            if owner in best:
                continue
            page = self.pages[owner]
            passage = self._passages[hit.index] or page.title
            best[owner] = Ranked(page, passage, round(hit.score / top, 6))
            if len(best) >= count:
                break
        return list(best.values())


def bocha_item(ranked: Ranked) -> dict[str, Any]:
    """One Bocha ``webPages.value`` item for a ranked page (module docstring)."""
    page = ranked.page
    snippet = ranked.passage.replace("\n", " ")
    if len(snippet) > SNIPPET_CHARS:
        snippet = snippet[:SNIPPET_CHARS] + "…"
    return {
        "id": None,
        "name": page.title,
        "url": page.url,
        "displayUrl": page.url,
        "snippet": snippet,
        "summary": ranked.passage,
        "siteName": page.site_name,
        "siteIcon": None,
        "datePublished": page.published_date,
        "dateLastCrawled": page.published_date,
        "cachedPageUrl": None,
        "language": None,
        "isFamilyFriendly": None,
        "isNavigational": None,
        "score": ranked.score,
    }


def bocha_payload(query: str, ranked: list[Ranked]) -> dict[str, Any]:
    """Bocha's whole answer for ``ranked`` results (an empty list gives no results)."""
    return {
        "code": 200,
        "log_id": "offline",
        "msg": None,
        "data": {
            "_type": "SearchResponse",
            "queryContext": {"originalQuery": query},
            "webPages": {
                "webSearchUrl": "",
                "totalEstimatedMatches": len(ranked),
                "someResultsRemoved": False,
                "value": [bocha_item(r) for r in ranked],
            },
        },
    }


class OfflineWebSource:
    """Saved pages in ``folder`` as a :class:`~gcite.web.WebSource` (``name = "offline"``).

    ``folder``: directory of ``*.md`` / ``*.txt`` saved pages (searched
    recursively). ``settings``: optional; gives ``web_timeout_s`` (seconds) and
    ``chunk_size`` (passage length, characters) unless ``timeout_s`` is passed.
    See the module docstring for the payload and the errors.
    """

    name: str = "offline"

    def __init__(
        self,
        folder: str | Path,
        *,
        settings: Settings | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise ConfigError(f"离线网页文件夹不存在: {self.folder}")
        self.timeout_s = (
            timeout_s
            if timeout_s is not None
            else (settings.web_timeout_s if settings is not None else 8.0)
        )
        if not self.timeout_s > 0:
            raise ConfigError(f"离线联网搜索的超时时间必须大于 0 秒: {self.timeout_s}")
        self.passage_chars = max(100, settings.chunk_size if settings is not None else 400)
        self._index: PageIndex | None = None
        self._fingerprint: Fingerprint | None = None
        self._lock = threading.Lock()

    def _current_index(self) -> PageIndex:
        with self._lock:
            fingerprint = folder_fingerprint(self.folder)
            if self._index is None or fingerprint != self._fingerprint:
                self._index = PageIndex(load_pages(self.folder), passage_chars=self.passage_chars)
                self._fingerprint = fingerprint
            return self._index

    def _search_sync(self, query: str, count: int) -> dict[str, Any]:
        try:
            if not self.folder.is_dir():
                raise FileNotFoundError("folder is gone")
            index = self._current_index()
        except OSError as exc:
            raise SourceUnavailable(f"无法读取离线网页文件夹 {self.folder}: {exc}") from exc
        return bocha_payload(query, index.rank(query, count))

    async def search(self, query: str, *, count: int) -> Any:
        """Search the saved pages; Bocha's payload with at most ``count`` results (module doc)."""
        text = clean_query(query)
        wanted = clamp_count(count, MAX_COUNT)
        if not text or wanted == 0:
            return bocha_payload(text, [])
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.to_thread(self._search_sync, text, wanted)
        except TimeoutError as exc:
            raise SourceTimeout(
                f"离线联网搜索在 {self.timeout_s:g} 秒内没有完成: {self.folder}"
            ) from exc

    async def aclose(self) -> None:
        """Drop the in-memory index. Safe to call twice."""
        self._index = None
        self._fingerprint = None

    async def __aenter__(self) -> OfflineWebSource:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"OfflineWebSource(folder={str(self.folder)!r})"


__all__ = ["MAX_COUNT", "OfflineWebSource", "PageIndex", "bocha_item", "bocha_payload"]
