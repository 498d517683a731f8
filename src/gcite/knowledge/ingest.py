"""Idempotent ingestion: files -> chunks -> vectors -> store, with a progress bar.

For each file under the given paths (directories are walked recursively;
hidden files and unsupported types are skipped):

1. convert (:mod:`convert`), merge metadata: front matter < manifest entry;
2. hash text + metadata + chunk settings + embedder: an unchanged hash is
   skipped, a changed one replaces every chunk of that document;
3. chunk, embed (dense + BM25 sparse) and write.

Files previously ingested into the same dataset from the same root that no
longer exist are deleted. A file that cannot be read or converted is listed in
``IngestReport.failed`` with the reason; its previous version (if any) is kept,
and the rest is ingested. The catalog is saved after every document, so an
interrupted run loses at most the document in flight.

Source: issue 4 item 1.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gcite.config import Settings
from gcite.errors import ConfigError
from gcite.knowledge.chunking import chunk_text
from gcite.knowledge.convert import (
    SUPPORTED_SUFFIXES,
    ConversionError,
    Manifest,
    convert_file,
    load_manifest,
)
from gcite.knowledge.filters import filter_payload
from gcite.knowledge.roles import RoleValueError, lookalikes, validate_metadata
from gcite.knowledge.sparse import document_vector
from gcite.knowledge.store import HybridStore, PointData, open_store, payload_of, stable_id

PIPELINE_VERSION = "1"  # bump when chunking/payload changes, to force re-ingestion
EMBED_BATCH = 32


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
                if any(part.startswith(".") for part in rel.parts):
                    continue
                supported = file.suffix.lower() in SUPPORTED_SUFFIXES
                if supported and file.is_file() and file not in seen:
                    seen.add(file)
                    sources.append(_Source(file, path))
        elif path.is_file():
            if path not in seen:
                seen.add(path)
                sources.append(_Source(path, path.parent))
        else:
            report.failed.append((Path(raw), "路径不存在"))
    return sources, roots


def _metadata(
    source: _Source,
    front: dict[str, Any],
    manifest: Manifest | None,
    title: str | None,
    lookalikes: Sequence[str] = (),
) -> dict[str, Any]:
    meta = dict(front)
    if manifest is not None:
        entry = manifest.metadata_for(source.path, source.root)
        if entry:
            meta.update(entry)
    if not meta.get("document_title"):
        meta["document_title"] = title or source.path.stem
    meta.setdefault("source_file_url", "")
    return validate_metadata(meta, document=source.path.name, allowed_lookalikes=lookalikes)


def _fingerprint(text: str, meta: dict[str, Any], settings: Settings, embedder: str) -> str:
    digest = hashlib.sha256()
    for part in (
        PIPELINE_VERSION,
        embedder,
        str(settings.chunk_size),
        str(settings.chunk_overlap),
        json.dumps(meta, ensure_ascii=False, sort_keys=True),
        text,
    ):
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def _progress(enabled: bool, total: int) -> Any:
    if not enabled:
        return nullcontext(None)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("[bold]导入[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=False,
    )


def _batches(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def ingest_paths(
    paths: Sequence[Path],
    *,
    settings: Settings,
    dataset: str,
    manifest: Path | None = None,
    progress: bool = False,
) -> IngestReport:
    """Ingest files and directories into ``dataset`` (see the module docstring).

    Raises :class:`ConfigError` for an empty dataset name or invalid chunk
    settings, :class:`ConversionError` for an unreadable manifest and
    :class:`StoreError` when the store cannot be opened or written. Per-file
    problems never raise: they are reported in ``IngestReport.failed``.
    """
    if not isinstance(dataset, str) or not dataset.strip():
        raise ConfigError("数据集名称不能为空")
    if settings.chunk_size <= 0 or not 0 <= settings.chunk_overlap < settings.chunk_size:
        raise ConfigError("chunk_size 必须为正数，且 0 <= chunk_overlap < chunk_size")
    dataset = dataset.strip()
    man = load_manifest(Path(manifest)) if manifest is not None else None
    report = IngestReport(dataset=dataset)
    sources, roots = _walk(paths, report)
    store = open_store(settings, create=True)
    try:
        _run(store, sources, roots, report, settings, dataset, man, progress)
    finally:
        store.close()
    return report


def _run(
    store: HybridStore,
    sources: list[_Source],
    roots: set[Path],
    report: IngestReport,
    settings: Settings,
    dataset: str,
    man: Manifest | None,
    progress: bool,
) -> None:
    embedder = store.embedder(for_write=True)
    with store.lock:
        entry = store.catalog.dataset(dataset)
        docs: dict[str, dict[str, Any]] = entry["documents"]
        array_fields: set[str] = set(entry.get("array_fields", []))
    seen_ids: set[str] = set()
    with _progress(progress, len(sources)) as bar:
        task = bar.add_task(dataset, total=len(sources)) if bar is not None else None
        for source in sources:
            document_id = stable_id(dataset, str(source.path))
            seen_ids.add(document_id)
            if bar is not None:
                bar.update(task, description=source.path.name)
            try:
                converted = convert_file(source.path)
                meta = _metadata(
                    source, converted.metadata, man, converted.title, lookalikes(settings)
                )
            except (ConversionError, RoleValueError) as exc:
                report.failed.append((source.path, str(exc)))
            else:
                fingerprint = _fingerprint(converted.text, meta, settings, embedder.name)
                previous = docs.get(document_id)
                if previous is not None and previous.get("hash") == fingerprint:
                    report.unchanged += 1
                else:
                    chunks = chunk_text(
                        converted.text,
                        chunk_size=settings.chunk_size,
                        chunk_overlap=settings.chunk_overlap,
                    )
                    title = str(meta["document_title"])
                    texts = [f"{title}\n{c.text}" for c in chunks]
                    vectors = [
                        row
                        for batch in _batches(texts, EMBED_BATCH)
                        for row in embedder.embed_documents(batch)
                    ]
                    lookups = filter_payload(meta)
                    array_fields.update(k for k, v in meta.items() if isinstance(v, list))
                    points = []
                    for chunk, text, vector in zip(chunks, texts, vectors, strict=True):
                        segment_id = stable_id(document_id, fingerprint, str(chunk.position))
                        payload = payload_of(
                            dataset=entry,
                            dataset_name=dataset,
                            document_id=document_id,
                            document_name=source.path.name,
                            segment_id=segment_id,
                            position=chunk.position,
                            content=chunk.text,
                            content_hash=hashlib.sha256(chunk.text.encode()).hexdigest()[:32],
                            articles=chunk.articles,
                            doc_metadata=meta,
                            lookups=lookups,
                        )
                        points.append(
                            PointData(segment_id, vector.tolist(), document_vector(text), payload)
                        )
                    store.write_document(document_id, points)
                    with store.lock:
                        docs[document_id] = {
                            "path": str(source.path),
                            "root": str(source.root),
                            "name": source.path.name,
                            "hash": fingerprint,
                            "segments": len(points),
                        }
                        entry["array_fields"] = sorted(array_fields)
                        store.save()
                    report.chunks += len(points)
                    if previous is None:
                        report.added += 1
                    else:
                        report.updated += 1
            if bar is not None:
                bar.advance(task)
    for document_id, info in list(docs.items()):
        if document_id in seen_ids or Path(info["root"]) not in roots:
            continue
        if Path(info["path"]).exists():
            continue
        store.delete_document(document_id)
        with store.lock:
            docs.pop(document_id, None)
            store.save()
        report.deleted += 1
    store.save()


__all__ = ["IngestReport", "ingest_paths"]
