"""An in-memory :class:`~gcite.knowledge.KnowledgeStore`: lexical search, no embeddings.

:class:`MemoryStore` passes the store contract (:mod:`gcite.testing.store_contract`) and
stands in for the real store in tests of what sits above it (the chatflow, the
services) where the embeddings are not what the test is about. It reuses the pieces of
the real store: the chunker (:mod:`gcite.knowledge.chunking`), metadata and role
validation (:mod:`gcite.roles`), the payload and result shapes
(:mod:`gcite.knowledge.store`, :mod:`gcite.knowledge.results`), the filter grammar
compiled to Python predicates (:mod:`gcite.knowledge.filters`) and the BM25 tokeniser
with the lexical-coverage score (:mod:`gcite.knowledge.sparse`,
:mod:`gcite.knowledge.relevance`). A chunk is a candidate when it shares a token with
the query; its score is :func:`~gcite.knowledge.relevance.relevance` without a dense
cosine. Nothing is persisted. Thread-safe (one lock).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gcite.errors import StoreError
from gcite.knowledge.catalog import stable_id
from gcite.knowledge.chunking import bounded, chunk_text
from gcite.knowledge.filters import (
    ROLE_FIELD,
    Node,
    PayloadModels,
    Predicate,
    build_filter,
    filter_payload,
    role_visibility,
)
from gcite.knowledge.ingest import MAX_TITLE_CHARS
from gcite.knowledge.relevance import LEXICAL_ONLY, lexical_coverage, relevance
from gcite.knowledge.results import rank, result_item
from gcite.knowledge.search_args import (
    check_roles,
    clamp_threshold,
    clamp_top_k,
    query_text,
    unknown_dataset,
)
from gcite.knowledge.sparse import document_vector, query_weights
from gcite.knowledge.store import VOCABULARIES_KEPT, DocumentPayload
from gcite.knowledge.vocabulary import (
    Vocabulary,
    build_vocabulary,
    document_vocabulary,
    shipped_synonyms,
)
from gcite.roles import validate_metadata


@dataclass(frozen=True)
class _Point:
    payload: dict[str, Any]
    tokens: frozenset[int]


class MemoryStore:
    """A knowledge base held in memory (see the module docstring).

    Fill it with :meth:`add` (one document's text) or :meth:`ingest` (files, converted as
    ``gcite ingest`` converts them); search it as any
    :class:`~gcite.knowledge.KnowledgeStore`. ``chunk_size`` / ``chunk_overlap``: the
    chunker's sizes in characters. A closed store raises :class:`StoreError`.
    """

    def __init__(
        self,
        *,
        chunk_size: int = 600,
        chunk_overlap: int = 80,
        synonyms: Sequence[tuple[str, ...]] | None = None,
    ) -> None:
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        # the query vocabulary (gcite.knowledge.vocabulary): each document's roles and
        # words, and the synonym groups (default: the shipped table); the vocabularies
        # built, by the documents they were built from (at most VOCABULARIES_KEPT)
        self._synonyms = list(shipped_synonyms() if synonyms is None else synonyms)
        self._vocabularies: dict[str, tuple[Any, dict[str, Any]]] = {}
        self._built: dict[frozenset[str], Vocabulary] = {}
        self._points: dict[str, list[_Point]] = {}  # document id -> its chunks
        self._datasets: dict[str, dict[str, Any]] = {}
        self._array_fields: set[str] = {ROLE_FIELD}
        self._lock = threading.Lock()
        self._closed = False

    # -- filling ------------------------------------------------------------

    def add(
        self,
        dataset: str,
        name: str,
        text: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        document_id: str | None = None,
    ) -> str:
        """Store the document ``name`` (its ``text``, chunked) in ``dataset``; its id.

        ``metadata``: the document's metadata (``document_title`` defaults to ``name``'s
        stem, ``access_roles`` are validated as ingestion does: a malformed value raises
        :class:`~gcite.roles.RoleValueError`). A document with the same id
        (default: derived from ``dataset`` and ``name``) is replaced.
        """
        self._check_open()
        meta = validate_metadata(dict(metadata or {}), document=name)
        if not meta.get("document_title"):
            meta["document_title"] = Path(name).stem or name
        meta.setdefault("source_file_url", "")
        document_id = document_id or stable_id(dataset, name)
        title = bounded(str(meta["document_title"]), MAX_TITLE_CHARS)
        with self._lock:
            entry = self._datasets.setdefault(
                dataset, {"dataset_id": stable_id("dataset", dataset)}
            )
            self._array_fields.update(k for k, v in meta.items() if isinstance(v, list))
            document = DocumentPayload(
                dataset=entry,
                dataset_name=dataset,
                document_id=document_id,
                document_name=name,
                doc_metadata=meta,
                lookups=filter_payload(meta),
            )
            points = []
            for chunk in chunk_text(
                text, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap
            ):
                payload = document.chunk(
                    segment_id=stable_id(document_id, str(chunk.position)),
                    position=chunk.position,
                    content=chunk.text,
                    articles=chunk.articles,
                )
                indexed = f"{title}\n{chunk.text}"
                points.append(_Point(payload, frozenset(document_vector(indexed).indices)))
            self._points[document_id] = points
            roles = meta.get(ROLE_FIELD)
            self._vocabularies[document_id] = (roles, document_vocabulary(text))
            self._built.clear()
        return document_id

    def vocabulary(self, roles: Sequence[str] | None = None) -> Vocabulary:
        """The query vocabulary of the stored documents visible to ``roles`` (the search's
        role rule, :func:`~gcite.knowledge.filters.role_visibility`; ``None``: every
        document)."""
        check_roles(roles)
        visible = role_visibility(roles)
        with self._lock:
            documents = frozenset(
                d for d, (value, _) in self._vocabularies.items() if visible(value)
            )
            built = self._built.get(documents)
            if built is None:
                entries = [self._vocabularies[d][1] for d in sorted(documents)]
                built = build_vocabulary(entries, self._synonyms)
                if len(self._built) >= VOCABULARIES_KEPT:
                    self._built.clear()
                self._built[documents] = built
            return built

    def normalise_query(self, query: str, roles: Sequence[str] | None = None) -> str:
        """``query`` in the wording of the stored documents visible to ``roles``, as
        :meth:`search` searches it for them."""
        return self.vocabulary(roles).normalise(query_text(query))

    def ingest(
        self, paths: Iterable[Path], *, dataset: str, manifest: Path | None = None
    ) -> list[tuple[Path, str]]:
        """Add every supported, non-hidden file under ``paths`` to ``dataset``.

        Files are converted by :func:`gcite.knowledge.convert.convert_file`; metadata is
        the file's own (front matter, document properties) updated by its ``manifest``
        entry. Returns the files that could not be converted, with the reason.
        """
        from gcite.knowledge.convert import (
            SUPPORTED_SUFFIXES,
            ConversionError,
            convert_file,
            load_manifest,
        )
        from gcite.roles import RoleValueError

        man = load_manifest(manifest) if manifest is not None else None
        failed: list[tuple[Path, str]] = []
        for root in paths:
            root = Path(root)
            files = sorted(root.rglob("*")) if root.is_dir() else [root]
            for file in files:
                rel = file.relative_to(root) if root.is_dir() else Path(file.name)
                if not file.is_file() or any(part.startswith(".") for part in rel.parts):
                    continue
                if file.suffix.lower() not in SUPPORTED_SUFFIXES:
                    continue
                try:
                    converted = convert_file(file)
                    meta = dict(converted.metadata)
                    if man is not None:
                        entry = man.metadata_for(file, root if root.is_dir() else file.parent)
                        meta.update(entry or {})
                    if not meta.get("document_title") and converted.title:
                        meta["document_title"] = converted.title
                    self.add(dataset, file.name, converted.text, meta)
                except (ConversionError, RoleValueError) as exc:
                    failed.append((file, str(exc)))
        return failed

    # -- the KnowledgeStore contract ----------------------------------------

    def search(
        self,
        query: str,
        *,
        dataset: str | None = None,
        roles: Sequence[str] | None = None,
        condition: Mapping[str, Any] | Node | None = None,
        top_k: int = 5,
        score_threshold: float = 0.0,
    ) -> list[dict[str, Any]]:
        """Lexical search -> Dify KR ``result`` items; shapes and errors as
        :class:`~gcite.knowledge.KnowledgeStore` (``top_k`` clamped to 1-100)."""
        self._check_open()
        text = query_text(query)
        matches = self._filter(dataset, roles, condition)
        if not text:
            return []
        weights = query_weights(self.vocabulary(roles).normalise(text))
        limit = clamp_top_k(top_k)
        threshold = clamp_threshold(score_threshold)
        scored: list[tuple[float, dict[str, Any]]] = []
        with self._lock:
            points = [p for chunks in self._points.values() for p in chunks]
        for point in points:
            coverage = lexical_coverage(weights, point.tokens)
            if coverage <= 0 or not matches(point.payload):
                continue
            score = relevance(None, coverage, LEXICAL_ONLY)
            if score >= threshold:
                scored.append((score, point.payload))
        scored.sort(key=lambda item: -item[0])
        return rank([result_item(payload, score) for score, payload in scored[:limit]])

    def datasets(self) -> list[str]:
        """Names of the datasets in this store, sorted."""
        self._check_open()
        with self._lock:
            return sorted(self._datasets)

    def visible_document_ids(
        self, document_ids: Sequence[str], *, roles: Sequence[str], dataset: str | None = None
    ) -> set[str]:
        """The ids among ``document_ids`` stored (in ``dataset``) and visible to ``roles``."""
        self._check_open()
        check_roles(roles)
        with self._lock:
            if dataset is not None and dataset not in self._datasets:
                return set()
            stored = {d: list(points) for d, points in self._points.items()}
        matches = self._filter(dataset, list(roles), None)
        return {
            d
            for d in document_ids
            if isinstance(d, str) and any(matches(p.payload) for p in stored.get(d, []))
        }

    def close(self) -> None:
        """Close this store. Idempotent."""
        self._closed = True

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------

    def _filter(
        self,
        dataset: str | None,
        roles: Sequence[str] | None,
        condition: Mapping[str, Any] | Node | None,
    ) -> Predicate:
        check_roles(roles)
        with self._lock:
            fields = frozenset(self._array_fields)
            known = sorted(self._datasets)
        predicate = build_filter(
            PayloadModels(), dataset=dataset, roles=roles, condition=condition, array_fields=fields
        )
        if dataset is not None and dataset not in known:
            raise unknown_dataset(dataset, known)
        return predicate if predicate is not None else (lambda p: True)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("知识库已关闭")


__all__ = ["MemoryStore"]
