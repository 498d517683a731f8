"""Knowledge-base management: datasets and documents listed, created, updated, deleted.

One layer used by the CLI (``gcite datasets``, ``gcite documents``, ``gcite status``) and
by the running service's management API (:mod:`gcite.service.datasets`, Dify's Knowledge
API shape), so both see and change the same thing. Everything goes through a
:class:`~gcite.knowledge.store.KnowledgeStore`; handles are shared per data dir within
a process, so the service's open store is the one written (no second process needed).

Documents created through the API (text or an uploaded file) are kept under
``<data_dir>/uploads/<dataset_id>/<file name>`` and ingested with
:func:`~gcite.knowledge.ingest.ingest_paths` (same conversion, role checks, chunking
and fingerprints as ``gcite ingest``); the same name in the same dataset updates the
document (same document id). Metadata given with them goes to a sidecar manifest
next to the file.

Errors: :class:`ManageError` with an HTTP-like ``status`` (404 unknown dataset or
document, 409 duplicate name, 400 bad input) and a Chinese message.

Source: Dify Knowledge API (``/datasets``,
``/datasets/{id}/documents``), ``../shared/reference/dify-openapi-service.json``.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gcite.config import Settings
from gcite.errors import GciteError
from gcite.knowledge.convert import SUPPORTED_SUFFIXES
from gcite.knowledge.ingest import IngestReport, ingest_paths
from gcite.knowledge.store import HybridStore as KnowledgeStore
from gcite.knowledge.store import stable_id

UPLOADS = "uploads"
MAX_NAME_CHARS = 120
_BAD_NAME = re.compile(r"[\x00-\x1f/\\]")
# One writer at a time per process: ingestion reads-modifies-writes the catalog.
_write_lock = threading.Lock()


class ManageError(GciteError):
    """A management request that cannot be done; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, *, status: int = 400, code: str = "invalid_param") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class DatasetInfo:
    """One dataset: name, stable id, number of documents and chunks."""

    id: str
    name: str
    documents: int
    chunks: int


@dataclass(frozen=True)
class DocumentInfo:
    """One document of a dataset (``segments`` = stored chunks)."""

    id: str
    name: str
    dataset: str
    path: str
    segments: int
    updated_at: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)


def list_datasets(store: KnowledgeStore) -> list[DatasetInfo]:
    """Every dataset of the store, sorted by name."""
    with store.lock:
        items = list(store.catalog.datasets.items())
    out = []
    for name, entry in sorted(items):
        docs = entry.get("documents", {})
        out.append(
            DatasetInfo(
                id=str(entry.get("dataset_id") or stable_id("dataset", name)),
                name=name,
                documents=len(docs),
                chunks=sum(int(d.get("segments", 0)) for d in docs.values()),
            )
        )
    return out


def dataset_named(store: KnowledgeStore, ref: str) -> str:
    """The name of the dataset whose name or id is ``ref``; 404 :class:`ManageError`."""
    for info in list_datasets(store):
        if ref in (info.name, info.id):
            return info.name
    raise ManageError(f"没有数据集 {ref}", status=404, code="dataset_not_found")


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ManageError(f"{what}名称不能为空")
    text: str = name.strip()
    if len(text) > MAX_NAME_CHARS or _BAD_NAME.search(text) or text in {".", ".."}:
        raise ManageError(f"{what}名称无效: {text!r}")
    return text


def create_dataset(store: KnowledgeStore, name: Any) -> DatasetInfo:
    """Create an empty dataset; 409 when the name exists."""
    name = _check_name(name, "数据集")
    with _write_lock, store.lock:
        catalog = store.catalog
        if name in catalog.datasets:
            raise ManageError(
                "数据集名称已存在，请换一个名称", status=409, code="dataset_name_duplicate"
            )
        # copy on write: searches read the dataset table without the lock
        entry = {"dataset_id": stable_id("dataset", name), "array_fields": [], "documents": {}}
        catalog.datasets = {**catalog.datasets, name: entry}
        catalog.save()
    return next(i for i in list_datasets(store) if i.name == name)


def list_documents(store: KnowledgeStore, dataset: str) -> list[DocumentInfo]:
    """The documents of ``dataset`` (name or id), sorted by name; 404 when unknown."""
    name = dataset_named(store, dataset)
    with store.lock:
        docs = dict(store.catalog.datasets[name].get("documents", {}))
    return sorted(
        (
            DocumentInfo(
                id=doc_id,
                name=str(info.get("name", "")),
                dataset=name,
                path=str(info.get("path", "")),
                segments=int(info.get("segments", 0)),
                updated_at=int(info.get("updated_at", 0)),
            )
            for doc_id, info in docs.items()
        ),
        key=lambda d: (d.name, d.id),
    )


def find_document(store: KnowledgeStore, dataset: str, ref: str) -> DocumentInfo:
    """The document of ``dataset`` whose id or file name is ``ref``; 404 when unknown,
    400 when the name matches several documents."""
    matches = [d for d in list_documents(store, dataset) if ref in (d.id, d.name)]
    if not matches:
        raise ManageError(f"数据集中没有文档 {ref}", status=404, code="document_not_found")
    if len(matches) > 1:
        ids = ", ".join(d.id for d in matches)
        raise ManageError(f"有多个文档名为 {ref}，请用文档 id 指定: {ids}")
    return matches[0]


def delete_document(store: KnowledgeStore, dataset: str, ref: str) -> DocumentInfo:
    """Remove a document's chunks and its catalog entry (and its uploaded copy)."""
    with _write_lock:
        doc = find_document(store, dataset, ref)
        store.delete_document(doc.id)
        with store.lock:
            store.catalog.datasets[doc.dataset]["documents"].pop(doc.id, None)
            store.save()
        _remove_upload(store.settings, store, doc)
    return doc


def delete_dataset(store: KnowledgeStore, dataset: str) -> DatasetInfo:
    """Remove a dataset with all its documents."""
    with _write_lock:
        name = dataset_named(store, dataset)
        info = next(i for i in list_datasets(store) if i.name == name)
        for doc in list_documents(store, name):
            store.delete_document(doc.id)
        with store.lock:
            catalog = store.catalog
            entry = catalog.datasets.get(name)
            catalog.datasets = {k: v for k, v in catalog.datasets.items() if k != name}
            store.save()
        if entry is not None:
            shutil.rmtree(_upload_dir(store.settings, str(entry["dataset_id"])), True)
    return info


def _upload_dir(settings: Settings, dataset_id: str) -> Path:
    return Path(settings.data_dir).expanduser().resolve() / UPLOADS / dataset_id


def _remove_upload(settings: Settings, store: KnowledgeStore, doc: DocumentInfo) -> None:
    path = Path(doc.path)
    root = Path(settings.data_dir).expanduser().resolve() / UPLOADS
    if path.is_relative_to(root):
        path.unlink(missing_ok=True)
        Path(str(path) + ".meta.json").unlink(missing_ok=True)


@dataclass(frozen=True)
class Upserted:
    """The result of :func:`upsert_document`: the document and the ingest counts."""

    document: DocumentInfo
    report: IngestReport
    created: bool


def upsert_document(
    store: KnowledgeStore,
    dataset: str,
    *,
    name: Any,
    data: bytes,
    metadata: Mapping[str, Any] | None = None,
) -> Upserted:
    """Create or replace document ``name`` of ``dataset`` (name or id) from file bytes.

    ``name`` is the file name; its suffix chooses the converter (``.md``, ``.txt``,
    ``.html``, ``.pdf``, ``.docx``; a name without a supported suffix is taken as
    Markdown text and gets ``.md``). ``metadata`` (``doc_metadata``: e.g.
    ``access_roles``) overrides front matter. Blocking (embeds the text): call it off
    the event loop. Raises :class:`ManageError` (400) when the document cannot be
    converted or its metadata is refused (e.g. a malformed ``access_roles``): nothing
    is changed then.
    """
    name = _check_name(name, "文档")
    if Path(name).suffix.lower() not in SUPPORTED_SUFFIXES:
        name += ".md"
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ManageError("doc_metadata 必须是对象")
    with _write_lock:
        dataset_name = dataset_named(store, dataset)
        with store.lock:
            dataset_id = str(store.catalog.datasets[dataset_name]["dataset_id"])
        folder = _upload_dir(store.settings, dataset_id)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / name
        backup = target.read_bytes() if target.exists() else None
        target.write_bytes(data)
        manifest = Path(str(target) + ".meta.json")
        old_manifest = manifest.read_bytes() if manifest.exists() else None
        manifest.write_text(
            json.dumps(
                {"dataset_name": dataset_name, "documents": {name: dict(metadata or {})}},
                ensure_ascii=False,
            ),
            encoding="utf-8",
        )
        try:
            report = ingest_paths(
                [target], settings=store.settings, dataset=dataset_name, manifest=manifest
            )
        except GciteError:
            _restore(target, backup, manifest, old_manifest)
            raise
        if report.failed:
            _restore(target, backup, manifest, old_manifest)
            reason = "; ".join(r for _, r in report.failed)
            raise ManageError(f"文档 {name} 未能导入: {reason}", status=400)
        document_id = stable_id(dataset_name, str(target))
        with store.lock:
            entry = store.catalog.datasets[dataset_name]["documents"].get(document_id)
            if entry is not None:
                entry["updated_at"] = int(time.time())
                store.save()
    doc = find_document(store, dataset_name, document_id)
    return Upserted(doc, report, created=report.added > 0)


def _restore(target: Path, backup: bytes | None, manifest: Path, old: bytes | None) -> None:
    for path, content in ((target, backup), (manifest, old)):
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(content)


def status(store: KnowledgeStore) -> dict[str, Any]:
    """What ``gcite status`` shows: data dir, store, embedder, datasets with counts."""
    settings = store.settings
    datasets = list_datasets(store)
    with store.lock:
        embedder = store.catalog.embedder or settings.embed_backend
        dim = store.catalog.dim
    return {
        "data_dir": str(Path(settings.data_dir).expanduser().resolve()),
        "store": f"Qdrant {settings.qdrant_url}" if settings.qdrant_url else "Qdrant Edge（内嵌）",
        "embedder": embedder,
        "dimensions": dim,
        "datasets": [
            {"id": d.id, "name": d.name, "documents": d.documents, "chunks": d.chunks}
            for d in datasets
        ],
        "documents": sum(d.documents for d in datasets),
        "chunks": sum(d.chunks for d in datasets),
        "stored_chunks": store.count() if dim else 0,
    }


__all__ = [
    "DatasetInfo",
    "DocumentInfo",
    "ManageError",
    "Upserted",
    "create_dataset",
    "dataset_named",
    "delete_dataset",
    "delete_document",
    "find_document",
    "list_datasets",
    "list_documents",
    "status",
    "upsert_document",
]
