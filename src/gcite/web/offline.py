"""The offline web source: a local folder of saved pages answering like Bocha.

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
                  "summary": the best passage (about chunk_size characters),
                  "siteName": site_name, "datePublished": published_date,
                  "score": relevance in [0, 1], …}]}}}

One result per page (its best passage), at most ``count`` results, best
first. ``score`` is an addition to Bocha's shape: the merge node uses it to
rank web chunks.

Search (``index=``):

* ``"hybrid"`` (default): the knowledge base's own hybrid search (dense
  embeddings + BM25, scored by relevance; :mod:`gcite.knowledge`). The pages,
  read exactly as for ``"bm25"`` (fallbacks applied), are staged as clean
  Markdown under ``<data_dir>/web-offline/pages/`` and ingested with
  :func:`gcite.knowledge.ingest_paths` into the dataset
  ``_web:<folder name>-<hash of its path>`` of a store of its own,
  ``<data_dir>/web-offline`` (an embedded Qdrant Edge shard, so the
  knowledge base's dataset list and the External Knowledge API never see
  it). Ingestion is idempotent: unchanged files are skipped. Dense search
  always returns the nearest pages, even for an unrelated query.
* ``"bm25"``: a small in-memory BM25 over jieba tokens (:mod:`gcite.web.bm25`)
  with no data directory and no model; scores are divided by the best one
  and pages sharing no word with the query are never returned.

Either index is built on first use and refreshed when a file in the folder
is added, removed or changed. Building the hybrid index loads the embedding
model and embeds every page, which can take longer than one search's
timeout: the first searches then raise :class:`SourceTimeout` while the
build goes on in the background. ``warm_up=True`` (what
:func:`gcite.web.make_web_source` uses) starts that build at construction.

Errors: :class:`ConfigError` at construction when the folder does not exist;
:class:`SourceTimeout` when a search (including a rebuild) takes longer than
``timeout_s``; :class:`SourceUnavailable` when the folder vanished or cannot
be read. A blank query or ``count < 1`` returns the empty payload.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gcite.config import Settings
from gcite.errors import ConfigError, GciteError, SourceTimeout, SourceUnavailable
from gcite.web.base import clamp_count, clean_query
from gcite.web.bm25 import Bm25Index
from gcite.web.pages import (
    SavedPage,
    load_pages,
    normalize_date,
    split_passages,
)

if TYPE_CHECKING:
    from gcite.knowledge.store import StoreHandles

logger = logging.getLogger("gcite.web")

#: Most results one offline search returns (as Bocha's ``count``).
MAX_COUNT = 50
SNIPPET_CHARS = 200

Fingerprint = tuple[tuple[str, int, int], ...]


def folder_fingerprint(folder: Path) -> Fingerprint:
    """(relative path, size, mtime ns) of every visible file: changes when the folder does."""
    entries = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        stat = path.stat()
        entries.append((str(relative), stat.st_size, stat.st_mtime_ns))
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


INDEXES = ("hybrid", "bm25")


def dataset_name(folder: Path) -> str:
    """The knowledge-base dataset holding ``folder``'s pages: ``_web:<name>-<8 hex>``."""
    resolved = str(folder.expanduser().resolve())
    digest = hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:8]
    return f"_web:{folder.name or 'pages'}-{digest}"


def staged_name(relative: Path) -> Path:
    """Where a page at ``relative`` is staged: the same path, ``.md`` appended unless present."""
    return relative if relative.suffix == ".md" else relative.with_name(relative.name + ".md")


def staged_text(page: SavedPage, relative: Path) -> str:
    """A page rewritten with clean front matter (fallbacks applied) for ingestion."""
    meta = {
        "title": page.title,
        "document_title": page.title,
        "url": page.url,
        "site_name": page.site_name,
        "published_date": page.published_date,
        "page_path": relative.as_posix(),
    }
    front = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False, width=10_000)
    return f"---\n{front}---\n\n{page.body or page.title}\n"


def stage_pages(pages: list[SavedPage], folder: Path, target: Path) -> int:
    """Mirror ``pages`` (from ``folder``) into ``target`` as clean Markdown; returns the count.

    Only changed files are rewritten; staged files of pages that are gone are
    removed. The knowledge base refuses files with broken front matter, so the
    staged copies are what gets ingested: every page the BM25 index would
    serve is served by the hybrid index too, with the same metadata.
    """
    target.mkdir(parents=True, exist_ok=True)
    wanted: set[Path] = set()
    for page in pages:
        relative = page.path.relative_to(folder)
        path = target / staged_name(relative)
        wanted.add(path)
        text = staged_text(page, relative)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in list(target.rglob("*.md")):
        if path not in wanted:
            path.unlink()
    return len(wanted)


def _page_of(item: Mapping[str, Any], folder: Path) -> SavedPage:
    """The page of a knowledge-base result item (its staged front matter)."""
    metadata = item.get("metadata") or {}
    meta = metadata.get("doc_metadata") or {}
    return SavedPage(
        path=folder / str(meta.get("page_path") or metadata.get("document_name") or ""),
        title=str(meta.get("title") or meta.get("document_title") or "").strip(),
        url=str(meta.get("url") or "").strip(),
        site_name=str(meta.get("site_name") or "").strip(),
        published_date=normalize_date(meta.get("published_date")),
        body="",
    )


def web_index_folder(worker_id: int) -> str:
    """``web-offline``; in chat worker ``worker_id`` of ``gcite serve --workers N``
    (``settings.service.worker_id`` > 0), ``web-offline-worker-<id>``: the index is an
    embedded Qdrant Edge shard, which one process opens at a time, so each worker builds
    its own."""
    return f"web-offline-worker-{worker_id}" if worker_id > 0 else "web-offline"


class HybridPageIndex:
    """The folder in the knowledge base (hybrid search); one best passage per page.

    ``settings`` gives the embedding backend and ``chunk_size``; its
    ``data_dir`` is replaced by ``<data_dir>/web-offline``, where the pages are
    staged (``pages/<name>-<hash>/``, see :func:`stage_pages`) and ingested.
    Raises :class:`~gcite.errors.StoreError` (or :class:`ConfigError`) from the
    knowledge base and :class:`OSError` when the folder cannot be read.
    """

    def __init__(
        self, folder: Path, settings: Settings, handles: StoreHandles | None = None
    ) -> None:
        from gcite.knowledge import ingest_paths, open_store
        from gcite.knowledge.store import StoreHandles

        folder_name = web_index_folder(settings.service.worker_id)
        web_dir = Path(settings.data_dir).expanduser() / folder_name
        self.settings = settings.embedded_at(web_dir)
        self.folder = folder
        self.dataset = dataset_name(folder)
        staging = web_dir / "pages" / self.dataset.removeprefix("_web:")
        stage_pages(load_pages(folder), folder, staging)
        handles = handles or StoreHandles()  # the owner's: its embedder, its open shard
        report = ingest_paths(
            [staging], settings=self.settings, dataset=self.dataset, handles=handles
        )
        for path, reason in report.failed:
            logger.warning("offline web page %s not indexed: %s", path, reason)
        self._store = open_store(self.settings, handles=handles)

    def rank(self, query: str, count: int) -> list[Ranked]:
        """At most ``count`` pages for ``query``, best first (scores: the store's 0-1 score)."""
        items = self._store.search(
            query, dataset=self.dataset, roles=None, top_k=min(100, count * 4)
        )
        best: dict[str, Ranked] = {}
        for item in items:
            metadata = item.get("metadata") or {}
            page = _page_of(item, self.folder)
            # One result per page; the URL is the page's identity (as for a search engine).
            key = page.url or str(metadata.get("document_id") or metadata.get("document_name"))
            if key in best:
                continue
            passage = str(item.get("content") or "").strip() or page.title
            best[key] = Ranked(page, passage, float(metadata.get("score") or 0.0))
            if len(best) >= count:
                break
        return list(best.values())

    def close(self) -> None:
        """Release the store."""
        self._store.close()


class OfflineWebSource:
    """Saved pages in ``folder`` as a :class:`~gcite.web.WebSource` (``name = "offline"``).

    ``folder``: directory of ``*.md`` / ``*.txt`` saved pages (searched
    recursively). ``settings``: data directory, embedding backend,
    ``chunk_size`` (passage length, characters) and ``web_timeout_s``
    (seconds; ``timeout_s`` overrides it); defaults to ``Settings()``.
    ``index``: ``"hybrid"`` (default) or ``"bm25"``. ``warm_up``: start
    building the index in a background thread now. See the module docstring
    for the payload and the errors; a bad ``index`` or timeout, or a missing
    folder, is a :class:`ConfigError`.
    """

    name: str = "offline"

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        retry: object | None = None,
        handles: StoreHandles | None = None,
    ) -> OfflineWebSource:
        """The source ``settings.web.offline`` describes (``dir``, ``index``), its index
        build started in the background with the caller's ``handles`` (the hybrid
        index embeds with the model the knowledge store loaded, and shares a shard the
        caller holds open); ``retry`` is ignored
        (nothing is sent). Raises
        :class:`ConfigError` when no folder is set."""
        return cls._configured(settings, warm_up=True, handles=handles)

    @classmethod
    def check_settings(cls, settings: Settings) -> None:
        """Raise :class:`ConfigError` where :meth:`from_settings` would, building no
        index (nothing is read from the folder)."""
        cls._configured(settings, warm_up=False, handles=None)

    @classmethod
    def _configured(
        cls, settings: Settings, *, warm_up: bool, handles: StoreHandles | None
    ) -> OfflineWebSource:
        offline = settings.web.offline
        if not offline.dir.strip():
            raise ConfigError(
                "离线联网搜索需要保存网页的文件夹：请设置 web_dir（或环境变量 GCITE_WEB_DIR）"
            )
        return cls(
            offline.dir,
            settings=settings,
            index=offline.index,
            warm_up=warm_up,
            handles=handles,
        )

    def __init__(
        self,
        folder: str | Path,
        *,
        settings: Settings | None = None,
        timeout_s: float | None = None,
        index: str = "hybrid",
        warm_up: bool = False,
        handles: StoreHandles | None = None,
    ) -> None:
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise ConfigError(f"离线网页文件夹不存在: {self.folder}")
        if index not in INDEXES:
            raise ConfigError(f"离线联网搜索的索引方式只能是 hybrid 或 bm25: {index!r}")
        self.settings = settings if settings is not None else Settings()
        self.timeout_s = timeout_s if timeout_s is not None else self.settings.web.timeout_s
        if not self.timeout_s > 0:
            raise ConfigError(f"离线联网搜索的超时时间必须大于 0 秒: {self.timeout_s}")
        self.index = index
        self._handles = handles
        self.passage_chars = max(100, self.settings.knowledge.chunk_size)
        self._index: PageIndex | HybridPageIndex | None = None
        self._fingerprint: Fingerprint | None = None
        self._lock = threading.Lock()
        if warm_up:
            threading.Thread(target=self._warm_up, name="gcite-web-offline", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            self._current_index()
        except Exception as exc:  # reported again, as a SourceError, by the next search
            logger.warning("offline web index for %s not built: %s", self.folder, exc)

    def _current_index(self) -> PageIndex | HybridPageIndex:
        with self._lock:
            if not self.folder.is_dir():
                raise FileNotFoundError(f"folder is gone: {self.folder}")
            fingerprint = folder_fingerprint(self.folder)
            if self._index is None or fingerprint != self._fingerprint:
                old, self._index = self._index, None
                if isinstance(old, HybridPageIndex):
                    old.close()
                if self.index == "hybrid":
                    self._index = HybridPageIndex(self.folder, self.settings, self._handles)
                else:
                    self._index = PageIndex(
                        load_pages(self.folder), passage_chars=self.passage_chars
                    )
                self._fingerprint = fingerprint
            return self._index

    def _search_sync(self, query: str, count: int) -> dict[str, Any]:
        try:
            index = self._current_index()
            return bocha_payload(query, index.rank(query, count))
        except OSError as exc:
            raise SourceUnavailable(f"无法读取离线网页文件夹 {self.folder}: {exc}") from exc
        except GciteError as exc:
            raise SourceUnavailable(f"离线联网搜索失败: {exc}") from exc

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
        """Drop the index (and release the knowledge store). Safe to call twice."""
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._lock:
            old, self._index, self._fingerprint = self._index, None, None
        if isinstance(old, HybridPageIndex):
            old.close()

    async def __aenter__(self) -> OfflineWebSource:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"OfflineWebSource(folder={str(self.folder)!r}, index={self.index!r})"


__all__ = [
    "INDEXES",
    "MAX_COUNT",
    "HybridPageIndex",
    "OfflineWebSource",
    "PageIndex",
    "bocha_item",
    "bocha_payload",
    "dataset_name",
    "stage_pages",
]
