"""Idempotent ingestion: files -> chunks -> vectors -> store, with a progress bar.

For each file under the given paths (directories are walked recursively;
hidden files and unsupported types are skipped and listed in
``IngestReport.skipped`` with the reason):

1. convert (:mod:`convert`), merge metadata: front matter < manifest entry;
2. hash text + metadata + chunk settings + embedder: an unchanged hash is
   skipped, a changed one replaces every chunk of that document;
3. chunk, embed (dense + BM25 sparse) and write, batch by batch.

Plain-text files (``.md``, ``.txt``) are streamed: one pass hashes them and
reads the front matter and title (:func:`~gcite.knowledge.convert.scan_text`),
a second reads them line by line into the streaming chunker
(:func:`~gcite.knowledge.chunking.iter_chunks`), and every
:data:`EMBED_BATCH` chunks are embedded at once and every :data:`WRITE_BATCH` points
written (a store write is a WAL append with fsync); so memory does not
grow with the file and time grows linearly. Other formats are converted whole
(files are at most 50 MiB) in a child process bounded by the ``convert_*`` settings
(:mod:`gcite.knowledge.sandbox`) and then take the same batched path. The progress
bar counts bytes of input (and shows the chunks written).

Each chunk's indexed text (dense and BM25) is the document title, cut to
:data:`MAX_TITLE_CHARS`, then the chunk (its bounded heading breadcrumb, then
its body).

Files previously ingested into the same dataset from the same root that no
longer exist are deleted. A file that cannot be read or converted is listed in
``IngestReport.failed`` with the reason; its previous version (if any) is kept,
and the rest is ingested. Each document is written as a new version beside its old one
and swapped in with one catalog change (:meth:`~gcite.knowledge.store.HybridStore.commit_version`),
so searches see the old version until then and an interrupted run leaves every document
in its old or its new version.

Metadata follows the document: a document without a manifest entry keeps the metadata
given with its previous version (the catalog's ``given``, :func:`given_metadata`), so a
re-ingest never drops the roles an operator gave it.

After the run the store's dense index is built or brought up to date
(:meth:`~gcite.knowledge.store.HybridStore.optimize`: Qdrant Edge does not index by
itself; PostgreSQL maintains its HNSW index on every write).

Source: issue 4 item 1; issue 14 items 3-4.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gcite.config import Settings
from gcite.errors import ConfigError
from gcite.knowledge.catalog import dataset_by_ref, stable_id
from gcite.knowledge.chunking import Chunk, bounded, iter_chunks
from gcite.knowledge.convert import (
    SUPPORTED_SUFFIXES,
    TEXT_SUFFIXES,
    ConversionError,
    ConvertLimits,
    Manifest,
    convert_file,
    iter_text_lines,
    load_manifest,
    scan_text,
)
from gcite.knowledge.filters import filter_payload
from gcite.knowledge.sparse import document_vector, tokenize
from gcite.knowledge.store import (
    DocumentPayload,
    HybridStore,
    PointData,
    StoreHandles,
    open_store,
)
from gcite.knowledge.vocabulary import CATALOG_KEY, VocabularyBuilder
from gcite.knowledge.vocabulary import RULES as VOCABULARY_RULES
from gcite.roles import RoleValueError, validate_metadata

PIPELINE_VERSION = "2"  # bump when chunking/payload changes, to force re-ingestion
EMBED_BATCH = 32  # chunks per embedding call
WRITE_BATCH = 256  # points per store write (each write is a WAL append + fsync in Qdrant Edge)
MAX_TITLE_CHARS = 80  # of the document title prefixed to every chunk's indexed text (0: none)

log = logging.getLogger("gcite.knowledge")


@dataclass
class IngestReport:
    """Counts of one ingestion run, and the files that failed as ``(path, reason)``."""

    dataset: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    chunks: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    # HTTP-like status of the first failure (ConversionError.status: 413 a limit, 415 the
    # type, 422 unparsable; 400 refused metadata); 0 when nothing failed
    failed_status: int = 0

    @property
    def ok(self) -> bool:
        """True when no file failed."""
        return not self.failed


@dataclass
class _Source:
    path: Path
    root: Path


def _walk(paths: Sequence[Path], report: IngestReport) -> tuple[list[_Source], set[Path]]:
    sources: list[_Source] = []
    roots: set[Path] = set()
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        if path.is_dir():
            roots.add(path)
            for file in sorted(path.rglob("*")):
                rel = file.relative_to(path)
                hidden = [i for i, part in enumerate(rel.parts) if part.startswith(".")]
                if hidden:
                    if hidden[0] == len(rel.parts) - 1:  # list the hidden entry, not its content
                        report.skipped.append((file, "隐藏文件或目录"))
                    continue
                if not file.is_file() or file in seen:
                    continue
                if file.suffix.lower() not in SUPPORTED_SUFFIXES:
                    kind = file.suffix.lower() or "(无扩展名)"
                    report.skipped.append((file, f"不支持的文件类型: {kind}"))
                    continue
                seen.add(file)
                sources.append(_Source(file, path))
        elif path.is_file():
            if path.suffix.lower() not in SUPPORTED_SUFFIXES:
                kind = path.suffix.lower() or "(无扩展名)"
                report.failed.append((path, f"不支持的文件类型: {kind}"))
            elif path not in seen:
                seen.add(path)
                sources.append(_Source(path, path.parent))
        else:
            report.failed.append((Path(raw), "路径不存在"))
    return sources, roots


def _metadata(
    source: _Source,
    front: dict[str, Any],
    given: Mapping[str, Any],
    title: str | None,
    lookalikes: Sequence[str] = (),
) -> dict[str, Any]:
    """The document's metadata: front matter < ``given`` (manifest or API metadata)."""
    meta = dict(front)
    meta.update(given)
    if not meta.get("document_title"):
        meta["document_title"] = title or source.path.stem
    meta.setdefault("source_file_url", "")
    return validate_metadata(meta, document=source.path.name, allowed_lookalikes=lookalikes)


def given_metadata(
    source_path: Path, root: Path, manifest: Manifest | None, previous: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The metadata given with a document besides its own front matter: its manifest entry
    when it has a non-empty one, else what was given with its previous version (catalog
    ``given``): metadata follows the document, so a re-ingest or an update that gives none
    keeps the document's roles."""
    entry = manifest.metadata_for(source_path, root) if manifest is not None else None
    if entry:
        return dict(entry)
    kept = (previous or {}).get("given")
    return dict(kept) if isinstance(kept, Mapping) else {}


def _fingerprint(text_digest: str, meta: dict[str, Any], settings: Settings, embedder: str) -> str:
    digest = hashlib.sha256()
    for part in (
        PIPELINE_VERSION,
        embedder,
        str(settings.knowledge.chunk_size),
        str(settings.knowledge.chunk_overlap),
        json.dumps(meta, ensure_ascii=False, sort_keys=True),
        text_digest,
    ):
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def _progress(enabled: bool) -> Any:
    if not enabled:
        return nullcontext(None)
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]导入[/bold] {task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TextColumn("{task.fields[chunks]} 个分块"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        transient=False,
    )


def _batches(items: Iterable[Chunk], size: int) -> Iterator[list[Chunk]]:
    batch: list[Chunk] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass
class _Document:
    """A source ready to chunk: fingerprint inputs, metadata and a way to get its lines."""

    metadata: dict[str, Any]
    title: str | None
    digest: str
    lines: Any  # () -> Iterator[tuple[str, int]]: lines and the bytes each stands for


def _open_document(source: _Source, limits: ConvertLimits) -> _Document:
    """Scan (text) or convert (other formats) one file; raises :class:`ConversionError`."""
    path = source.path
    if path.suffix.lower() in TEXT_SUFFIXES:
        scan = scan_text(path)
        return _Document(
            scan.metadata, scan.title, scan.digest, lambda: iter_text_lines(path, scan)
        )
    converted = convert_file(path, limits)
    size = max(path.stat().st_size, 1)
    text_lines = converted.text.split("\n")
    per_line = size / max(len(text_lines), 1)

    def lines() -> Iterator[tuple[str, int]]:
        done = 0.0
        for number, line in enumerate(text_lines, 1):
            step = round(number * per_line - done)
            done += step
            yield line, step

    digest = hashlib.sha256(converted.text.encode("utf-8")).hexdigest()
    return _Document(converted.metadata, converted.title, digest, lines)


def _times(previous: dict[str, Any] | None) -> dict[str, int]:
    """``created_at`` (kept from ``previous``, the document's last catalog entry) and
    ``updated_at`` (now) of a document written now, Unix seconds."""
    now = int(time.time())
    created = (previous or {}).get("created_at")
    return {"created_at": int(created) if created else now, "updated_at": now}


def _given(meta: dict[str, Any], front: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``meta`` (validated) the document was given (front matter, manifest or
    the metadata kept from its previous version), without the defaults ingestion fills in."""
    keys = set(front) | set(given)
    return {k: v for k, v in meta.items() if k in keys}


def _plain(meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON-plain part of a document's metadata (strings, numbers, booleans, lists
    of strings), as the catalog keeps it for the Knowledge API's ``doc_metadata``."""
    scalars = (str, int, float, bool)
    return {
        k: v
        for k, v in meta.items()
        if isinstance(v, scalars) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
    }


def ingest_paths(
    paths: Sequence[Path],
    *,
    settings: Settings,
    dataset: str,
    manifest: Path | None = None,
    progress: bool = False,
    document_id: str | None = None,
    handles: StoreHandles | None = None,
) -> IngestReport:
    """Ingest files and directories into ``dataset`` (see the module docstring).

    ``document_id``: the id of the document when ``paths`` is one file (the Knowledge API
    keeps a document's id when its file moves or is renamed); otherwise ids are derived
    from the dataset and each file's path. ``handles``: the caller's open stores
    (:class:`~gcite.knowledge.store.StoreHandles`; the Knowledge API writes through the
    handle its searches use), else the store is opened on its own.

    Raises :class:`ConfigError` for an empty dataset name or invalid chunk
    settings, :class:`ConversionError` for an unreadable manifest and
    :class:`StoreError` when the store cannot be opened or written. Per-file
    problems never raise: they are reported in ``IngestReport.failed``.
    """
    if not isinstance(dataset, str) or not dataset.strip():
        raise ConfigError("数据集名称不能为空")
    if (
        settings.knowledge.chunk_size <= 0
        or not 0 <= settings.knowledge.chunk_overlap < settings.knowledge.chunk_size
    ):
        raise ConfigError("chunk_size 必须为正数，且 0 <= chunk_overlap < chunk_size")
    dataset = dataset.strip()
    man = load_manifest(Path(manifest)) if manifest is not None else None
    report = IngestReport(dataset=dataset)
    sources, roots = _walk(paths, report)
    ids = {s.path: document_id for s in sources} if document_id and len(sources) == 1 else {}
    store = open_store(settings, create=True, handles=handles)
    try:
        with store.lock:  # a dataset's id names it too
            dataset = dataset_by_ref(store.catalog.datasets, dataset) or dataset
        report.dataset = dataset
        _run(store, (sources, roots), report, settings, dataset, man, progress, ids)
        if report.chunks or report.deleted:
            store.optimize()  # the dense index searches use (Qdrant Edge builds it here)
        if report.added or report.updated or report.deleted:
            _keep_vocabulary(store)
    finally:
        store.close()
    return report


def _keep_vocabulary(store: HybridStore) -> None:
    """Build the query vocabulary of the knowledge base as ingestion left it, so that its
    pinyin keys are kept for the next process (:mod:`gcite.knowledge.sounds`: a service
    started after this ingest reads them instead of computing them). Best effort: a
    failure is logged, never raised (the next search builds the vocabulary, or reports
    what fails)."""
    try:
        store.vocabulary()
    except Exception as exc:
        log.warning("query vocabulary not built after ingestion: %s", exc)


@dataclass
class _Run:
    """What every document of one ingestion run shares."""

    store: HybridStore
    settings: Settings
    dataset: str
    entry: dict[str, Any]
    manifest: Manifest | None
    report: IngestReport
    bar: Any
    task: Any
    limits: ConvertLimits
    embedder: Any
    array_fields: set[str] = field(default_factory=set)
    ids: dict[Path, str] = field(default_factory=dict)

    def document_id(self, source: _Source) -> str:
        """The id of ``source``'s document (given, or derived from its path)."""
        return self.ids.get(source.path) or stable_id(self.dataset, str(source.path))

    @property
    def docs(self) -> dict[str, dict[str, Any]]:
        docs: dict[str, dict[str, Any]] = self.entry["documents"]
        return docs


def _run(
    store: HybridStore,
    walked: tuple[list[_Source], set[Path]],
    report: IngestReport,
    settings: Settings,
    dataset: str,
    man: Manifest | None,
    progress: bool,
    ids: Mapping[Path, str],
) -> None:
    sources, roots = walked
    embedder = store.embedder(for_write=True)
    with store.lock:
        entry = store.catalog.dataset(dataset)
        array_fields: set[str] = set(entry.get("array_fields", []))
    seen_ids: set[str] = set()
    total = sum(_size(s.path) for s in sources)
    with _progress(progress) as bar:
        task = bar.add_task(dataset, total=total or None, chunks=0) if bar is not None else None
        run = _Run(
            store,
            settings,
            dataset,
            entry,
            man,
            report,
            bar,
            task,
            ConvertLimits.from_settings(settings),
            embedder,
            array_fields,
            dict(ids),
        )
        for number, source in enumerate(sources, 1):
            seen_ids.add(run.document_id(source))
            if bar is not None:
                bar.update(task, description=f"{source.path.name} ({number}/{len(sources)})")
            start = bar.tasks[0].completed if bar is not None else 0.0
            try:
                _ingest_one(run, source, start)
            except (ConversionError, RoleValueError) as exc:
                store.rollback()  # where the store can, the document keeps its old version
                report.failed.append((source.path, str(exc)))
                if not report.failed_status:
                    report.failed_status = exc.status if isinstance(exc, ConversionError) else 400
            finally:
                if bar is not None:
                    bar.update(task, completed=start + _size(source.path))
    _drop_missing(run, seen_ids, roots)
    store.save()


def _drop_missing(run: _Run, seen_ids: set[str], roots: set[Path]) -> None:
    """Remove the documents of ``roots`` whose files no longer exist."""
    for document_id, info in list(run.docs.items()):
        if document_id in seen_ids or Path(info["root"]) not in roots:
            continue
        if Path(info["path"]).exists():
            continue

        def unlist(_catalog: Any, gone: str = document_id) -> None:
            run.docs.pop(gone, None)

        run.store.remove_document(document_id, unlist)
        run.report.deleted += 1


def _ingest_one(run: _Run, source: _Source, start: float) -> None:
    """Convert, chunk, embed and write one document as a new version, then swap it in."""
    document_id = run.document_id(source)
    document = _open_document(source, run.limits)
    previous = run.docs.get(document_id)
    given = given_metadata(source.path, source.root, run.manifest, previous)
    meta = _metadata(
        source, document.metadata, given, document.title, run.settings.knowledge.role_lookalikes
    )
    fingerprint = _fingerprint(document.digest, meta, run.settings, run.embedder.name)
    if previous is not None and previous.get("hash") == fingerprint:
        run.report.unchanged += 1
        if "doc_metadata" not in previous:  # ingested before the catalog kept metadata
            # the same metadata its chunks carry (the fingerprint holds it): the role
            # rule of its vocabulary reads it (gcite.knowledge.store.document_roles)
            with run.store.lock:
                previous["doc_metadata"] = _plain(_given(meta, document.metadata, given))
                run.store.save()
        kept = previous.get(CATALOG_KEY)
        # ingested before vocabularies were kept, or read with earlier rules
        if not isinstance(kept, dict) or kept.get("rules") != VOCABULARY_RULES:
            _add_vocabulary(run.store, previous, document)
        return
    run.array_fields.update(k for k, v in meta.items() if isinstance(v, list))
    run.store.begin_version(fingerprint)
    try:
        written, counts, vocabulary = _write_chunks(
            run, source, document, document_id, meta, fingerprint, start
        )
    except BaseException:
        run.store.abandon_version(document_id, fingerprint)
        raise

    def record(_catalog: Any) -> None:
        run.docs[document_id] = {
            "path": str(source.path),
            "root": str(source.root),
            "name": source.path.name,
            "title": meta["document_title"],
            "hash": fingerprint,
            "segments": written,
            **_times(previous),
            "word_count": counts[0],
            "tokens": counts[1],
            "doc_metadata": _plain(_given(meta, document.metadata, given)),
            "given": given,
            CATALOG_KEY: vocabulary.entry(),
        }
        run.entry["array_fields"] = sorted(run.array_fields)

    run.store.commit_version(document_id, fingerprint, record)
    if previous is None:
        run.report.added += 1
    else:
        run.report.updated += 1


def _add_vocabulary(store: HybridStore, info: dict[str, Any], document: _Document) -> None:
    """Give the catalog entry ``info`` of an unchanged document its vocabulary (read from
    its lines; nothing re-embedded)."""
    builder = VocabularyBuilder()
    piece: list[str] = []
    size = 0
    for line, _ in document.lines():
        piece.append(line)
        size += len(line)
        if size >= VOCABULARY_PIECE:
            builder.add("\n".join(piece))
            piece, size = [], 0
    builder.add("\n".join(piece))
    with store.lock:
        info[CATALOG_KEY] = builder.entry()
        store.save()


VOCABULARY_PIECE = 20_000
"""Characters of a document read at once for its vocabulary."""


def _write_chunks(
    run: _Run,
    source: _Source,
    document: _Document,
    document_id: str,
    meta: dict[str, Any],
    fingerprint: str,
    start: float,
) -> tuple[int, tuple[int, int], VocabularyBuilder]:
    """Chunk, embed and add the points of one version; returns how many were written,
    the text's characters and tokens, and its vocabulary."""
    settings, bar = run.settings, run.bar
    payloads = DocumentPayload(
        dataset=run.entry,
        dataset_name=run.dataset,
        document_id=document_id,
        document_name=source.path.name,
        doc_metadata=meta,
        lookups=filter_payload(meta),
        version=fingerprint,
    )
    title = bounded(str(meta["document_title"]), MAX_TITLE_CHARS)
    title = title if MAX_TITLE_CHARS > 0 else ""
    consumed = [0, 0, 0]  # bytes read, characters, tokens of the text

    def lines() -> Iterator[str]:
        for line, size in document.lines():
            consumed[0] += size
            consumed[1] += len(line)
            consumed[2] += len(tokenize(line))
            yield line

    chunks = iter_chunks(
        lines(),
        chunk_size=settings.knowledge.chunk_size,
        chunk_overlap=settings.knowledge.chunk_overlap,
    )
    written = 0
    pending: list[PointData] = []
    vocabulary = VocabularyBuilder()
    for batch in _batches(chunks, EMBED_BATCH):
        texts = [f"{title}\n{c.text}" if title else c.text for c in batch]
        for chunk in batch:
            vocabulary.add(chunk.text)
        vectors = run.embedder.embed_documents(texts)
        for chunk, text, vector in zip(batch, texts, vectors, strict=True):
            segment_id = stable_id(document_id, fingerprint, str(chunk.position))
            payload = payloads.chunk(
                segment_id=segment_id,
                position=chunk.position,
                content=chunk.text,
                articles=chunk.articles,
            )
            pending.append(PointData(segment_id, vector.tolist(), document_vector(text), payload))
        if len(pending) >= WRITE_BATCH:
            run.store.add_points(pending)
            written += len(pending)
            pending = []
        run.report.chunks += len(batch)
        if bar is not None:
            bar.update(
                run.task,
                completed=start + consumed[0],
                chunks=bar.tasks[0].fields["chunks"] + len(batch),
            )
    run.store.add_points(pending)
    return written + len(pending), (consumed[1], consumed[2]), vocabulary


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


__all__ = ["IngestReport", "given_metadata", "ingest_paths"]
