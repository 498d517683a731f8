"""Knowledge-base management: datasets and documents listed, created, updated, deleted.

One layer used by the CLI (``gcite datasets``, ``gcite documents``, ``gcite status``) and
by the running service's management API (:mod:`gcite.service.knowledge_api`, Dify's
Knowledge API shape) through :class:`LocalAdmin`, so both see and change the same thing.
Everything goes through a :class:`~gcite.knowledge.store.HybridStore`; handles are
shared per data dir within a process, so the service's open store is the one written (no
second process needed).

Documents created through the API (text or an uploaded file) are kept under
``<data_dir>/uploads/<dataset_id>/<file name>`` and ingested with
:func:`~gcite.knowledge.ingest.ingest_paths` (same conversion, role checks, chunking
and fingerprints as ``gcite ingest``); the same name in the same dataset updates the
document (same document id). Metadata given with them goes to a sidecar manifest
next to the file.

Errors: :class:`~gcite.knowledge.admin.ManageError` with an HTTP-like ``status`` (404
unknown dataset or document, 409 duplicate name, 400 bad input) and a Chinese message.

Source: Dify Knowledge API (``/datasets``,
``/datasets/{id}/documents``), ``../shared/reference/dify-openapi-service.json``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gcite.config import Settings
from gcite.errors import FilterError
from gcite.knowledge import segments, tags
from gcite.knowledge.admin import (
    METADATA_TYPES,
    DatasetInfo,
    DocumentInfo,
    KnowledgeStatus,
    ManageError,
    SegmentInfo,
    TagInfo,
    Upserted,
)
from gcite.knowledge.catalog import stable_id
from gcite.knowledge.convert import SUPPORTED_SUFFIXES
from gcite.knowledge.ingest import ingest_paths
from gcite.knowledge.store import HybridStore as KnowledgeStore

UPLOADS = "uploads"
MAX_NAME_CHARS = 120
_BAD_NAME = re.compile(r"[\x00-\x1f/\\]")


# Dify's codes for a refused file (ConversionError.status: 413 a limit, 415 the type)
_FAILED_CODES = {413: "file_too_large", 415: "unsupported_file_type"}


def list_datasets(store: KnowledgeStore) -> list[DatasetInfo]:
    """Every dataset of the store, sorted by name."""
    with store.lock:
        items = list(store.catalog.datasets.items())
        embedder = str(store.catalog.embedder or store.settings.embed.backend)
        all_tags = dict(store.catalog.tags)
    return [
        dataclasses.replace(
            _dataset_info(name, entry, embedder), tags=tags.bound_tags(all_tags, entry)
        )
        for name, entry in sorted(items)
    ]


def _dataset_info(name: str, entry: Mapping[str, Any], embedder: str) -> DatasetInfo:
    docs = entry.get("documents", {}).values()
    created = _int(entry, "created_at") or min((_int(d, "created_at") for d in docs), default=0)
    return DatasetInfo(
        id=str(entry.get("dataset_id") or stable_id("dataset", name)),
        name=name,
        documents=len(docs),
        chunks=sum(_int(d, "segments") for d in docs),
        embedding_model=embedder,
        description=str(entry.get("description") or ""),
        created_at=created,
        updated_at=max(
            [created, _int(entry, "updated_at")] + [_int(d, "updated_at") for d in docs]
        ),
        word_count=sum(_int(d, "word_count") for d in docs),
        metadata_fields=dict(entry.get("metadata_fields") or {}),
    )


def _int(entry: Mapping[str, Any], key: str) -> int:
    value = entry.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


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
    with store.lock:
        catalog = store.catalog
        if name in catalog.datasets:
            raise ManageError(
                "数据集名称已存在，请换一个名称", status=409, code="dataset_name_duplicate"
            )
        # copy on write: searches read the dataset table without the lock
        entry = {
            "dataset_id": stable_id("dataset", name),
            "array_fields": [],
            "documents": {},
            "created_at": int(time.time()),
        }
        catalog.datasets = {**catalog.datasets, name: entry}
        catalog.save()
    return next(i for i in list_datasets(store) if i.name == name)


def list_documents(store: KnowledgeStore, dataset: str) -> list[DocumentInfo]:
    """The documents of ``dataset`` (name or id), sorted by name; 404 when unknown."""
    name = dataset_named(store, dataset)
    with store.lock:
        docs = dict(store.catalog.datasets[name].get("documents", {}))
    by_age = sorted(docs, key=lambda d: (_int(docs[d], "created_at"), str(docs[d].get("name")), d))
    position = {doc_id: number for number, doc_id in enumerate(by_age, 1)}
    return sorted(
        (
            DocumentInfo(
                id=doc_id,
                name=str(info.get("name", "")),
                dataset=name,
                path=str(info.get("path", "")),
                segments=_int(info, "segments"),
                updated_at=_int(info, "updated_at"),
                metadata=dict(info.get("doc_metadata") or {}),
                created_at=_int(info, "created_at"),
                position=position[doc_id],
                word_count=_int(info, "word_count"),
                tokens=_int(info, "tokens"),
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
    doc = find_document(store, dataset, ref)
    store.delete_document(doc.id)
    with store.lock:
        store.catalog.datasets[doc.dataset]["documents"].pop(doc.id, None)
        store.save()
    _remove_upload(store.settings, store, doc)
    return doc


def delete_dataset(store: KnowledgeStore, dataset: str) -> DatasetInfo:
    """Remove a dataset with all its documents."""
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


def _checked_fields(fields: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for name, kind in fields.items():
        text = _check_name(name, "元数据字段")
        if kind not in METADATA_TYPES:
            raise ManageError(f"元数据字段类型必须是 {' / '.join(METADATA_TYPES)}: {kind!r}")
        out[text] = kind
    return out


def update_dataset(
    store: KnowledgeStore,
    dataset: str,
    *,
    description: str | None = None,
    metadata_fields: Mapping[str, str] | None = None,
) -> DatasetInfo:
    """Change a dataset's description and declared metadata fields (kept in its catalog
    entry); see :meth:`KnowledgeAdmin.update_dataset`."""
    if description is not None and (not isinstance(description, str) or len(description) > 400):
        raise ManageError("数据集描述必须是不超过 400 个字符的文本")
    fields = None if metadata_fields is None else _checked_fields(metadata_fields)
    name = dataset_named(store, dataset)
    with store.lock:
        catalog = store.catalog
        entry = dict(catalog.datasets[name])
        if description is not None:
            entry["description"] = description
        if fields is not None:
            entry["metadata_fields"] = fields
        entry["updated_at"] = int(time.time())
        catalog.datasets = {**catalog.datasets, name: entry}
        store.save()
    return next(i for i in list_datasets(store) if i.name == name)


def update_document_metadata(
    store: KnowledgeStore, dataset: str, ref: str, metadata: Mapping[str, Any]
) -> DocumentInfo:
    """Set metadata values of a document and re-index it from its file; the names not
    given keep their values (its ``access_roles`` too, wherever they came from: the
    catalog records the metadata a document was indexed with). 400 when its file is
    gone, when it was indexed before the catalog recorded metadata (ingest it again
    first), or for refused metadata (nothing changes then)."""
    if not isinstance(metadata, Mapping):
        raise ManageError("doc_metadata 必须是对象")
    doc = find_document(store, dataset, ref)
    path = Path(doc.path)
    with store.lock:
        info = dict(store.catalog.datasets[doc.dataset]["documents"].get(doc.id, {}))
    if not path.is_file():
        raise ManageError(f"文档 {doc.name} 的文件已不在 {doc.path}，无法更新元数据")
    if not isinstance(info.get("doc_metadata"), dict):
        raise ManageError(f"文档 {doc.name} 导入时未记录元数据，请先重新导入该文档再更新元数据")
    merged = {**info["doc_metadata"], **metadata}
    manifest = {"dataset_name": doc.dataset, "documents": {path.name: merged}}
    sidecar = Path(str(path) + ".meta.json")
    old = sidecar.read_bytes() if sidecar.exists() else None
    uploaded = old is not None  # documents of the API keep theirs next to the file
    # a document of the CLI: a manifest of this update only, in the data dir
    scratch = _upload_dir(store.settings, ".metadata") / f"{doc.id}.json"
    target = sidecar if uploaded else scratch
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")
    try:
        report = ingest_paths([path], settings=store.settings, dataset=doc.dataset, manifest=target)
    finally:
        scratch.unlink(missing_ok=True)
        if uploaded and (sys.exc_info()[0] is not None):
            sidecar.write_bytes(old or b"")
    if report.failed:
        if old is not None:
            sidecar.write_bytes(old)
        reason = "; ".join(r for _, r in report.failed)
        raise ManageError(f"文档 {doc.name} 的元数据未能更新: {reason}")
    return find_document(store, doc.dataset, doc.id)


def retrieve(
    store: KnowledgeStore,
    dataset: str,
    query: str,
    *,
    top_k: int,
    score_threshold: float = 0.0,
    condition: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Search one dataset (name or id) with no role filter; see
    :meth:`KnowledgeAdmin.retrieve`."""
    name = dataset_named(store, dataset)
    try:
        return store.search(
            query,
            dataset=name,
            roles=None,
            condition=condition,
            top_k=top_k,
            score_threshold=score_threshold,
        )
    except FilterError as exc:
        raise ManageError(str(exc)) from exc


def _upload_dir(settings: Settings, dataset_id: str) -> Path:
    return Path(settings.data_dir).expanduser().resolve() / UPLOADS / dataset_id


def _remove_upload(settings: Settings, store: KnowledgeStore, doc: DocumentInfo) -> None:
    path = Path(doc.path)
    root = Path(settings.data_dir).expanduser().resolve() / UPLOADS
    if path.is_relative_to(root):
        path.unlink(missing_ok=True)
        Path(str(path) + ".meta.json").unlink(missing_ok=True)


def upsert_document(
    store: KnowledgeStore,
    dataset: str,
    *,
    name: Any,
    data: bytes,
    metadata: Mapping[str, Any] | None = None,
    replace: str | None = None,
) -> Upserted:
    """Create or replace document ``name`` of ``dataset`` (name or id) from file bytes.

    ``name`` is the file name; its suffix chooses the converter (``.md``, ``.txt``,
    ``.html``, ``.pdf``, ``.docx``; a name without a supported suffix is taken as
    Markdown text and gets ``.md``). ``metadata`` (``doc_metadata``: e.g.
    ``access_roles``) overrides front matter. Blocking (embeds the text): call it off
    the event loop. Raises :class:`ManageError` when the document cannot be converted
    (the converter's status: 413 a conversion limit, named in the message; 415 the type;
    422 unparsable) or its metadata is refused (400, e.g. a malformed ``access_roles``):
    nothing is changed then, whatever the error (the uploaded file and its
    ``.meta.json`` are removed, or the previous ones put back). ``replace``: the id or
    name of the document this updates (``name`` may then be empty; another name is
    refused: documents are not renamed).
    """
    if replace is not None:
        current = find_document(store, dataset, replace)
        if name and current.name not in (name, f"{name}.md"):
            raise ManageError("不支持重命名文档", status=400)
        name = current.name
    name = _check_name(name, "文档")
    if Path(name).suffix.lower() not in SUPPORTED_SUFFIXES:
        name += ".md"
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ManageError("doc_metadata 必须是对象")
    dataset_name = dataset_named(store, dataset)
    with store.lock:
        dataset_id = str(store.catalog.datasets[dataset_name]["dataset_id"])
    folder = _upload_dir(store.settings, dataset_id)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    backup = target.read_bytes() if target.exists() else None
    manifest = Path(str(target) + ".meta.json")
    old_manifest = manifest.read_bytes() if manifest.exists() else None
    try:  # whatever happens (a parser's own error too), the old files come back
        target.write_bytes(data)
        manifest.write_text(
            json.dumps(
                {"dataset_name": dataset_name, "documents": {name: dict(metadata or {})}},
                ensure_ascii=False,
            ),
            encoding="utf-8",
        )
        report = ingest_paths(
            [target], settings=store.settings, dataset=dataset_name, manifest=manifest
        )
    except BaseException:
        _restore(target, backup, manifest, old_manifest)
        raise
    if report.failed:
        _restore(target, backup, manifest, old_manifest)
        reason = "; ".join(r for _, r in report.failed)
        status = report.failed_status or 400
        code = _FAILED_CODES.get(status, "invalid_param")
        raise ManageError(f"文档 {name} 未能导入: {reason}", status=status, code=code)
    document_id = stable_id(dataset_name, str(target))
    with store.lock:
        entry = store.catalog.datasets[dataset_name]["documents"].get(document_id)
        if entry is not None:
            entry["updated_at"] = int(time.time())
            store.save()
    doc = find_document(store, dataset_name, document_id)
    return Upserted(doc, created=report.added > 0)


def _restore(target: Path, backup: bytes | None, manifest: Path, old: bytes | None) -> None:
    for path, content in ((target, backup), (manifest, old)):
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(content)


def _store_name(settings: Settings) -> str:
    if settings.knowledge.store == "pgvector":
        url = settings.knowledge.database_url or settings.service.database_url
        return f"PostgreSQL + pgvector（{url.rsplit('@', 1)[-1]}）"
    return (
        f"Qdrant {settings.knowledge.qdrant_url}"
        if settings.knowledge.qdrant_url
        else "Qdrant Edge（内嵌）"
    )


class LocalAdmin:
    """:class:`~gcite.knowledge.admin.KnowledgeAdmin` over an open store of this process
    (the functions above). Does not own ``store``: :meth:`close` leaves it open (the
    :class:`~gcite.knowledge.access.KnowledgeAccess` that opened it closes it).

    Its writes run one at a time (a document's ingestion reads, modifies and writes the
    catalog); the functions above do not serialise writes themselves, so a process
    writes a knowledge base through one admin (its ``KnowledgeAccess``'s)."""

    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store
        self._writing = threading.Lock()

    def list_datasets(self) -> list[DatasetInfo]:
        """See :meth:`KnowledgeAdmin.list_datasets`."""
        return list_datasets(self.store)

    def create_dataset(self, name: str) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.create_dataset`."""
        with self._writing:
            return create_dataset(self.store, name)

    def delete_dataset(self, dataset: str) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.delete_dataset`."""
        with self._writing:
            return delete_dataset(self.store, dataset)

    def update_dataset(
        self,
        dataset: str,
        *,
        description: str | None = None,
        metadata_fields: Mapping[str, str] | None = None,
    ) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.update_dataset`."""
        with self._writing:
            return update_dataset(
                self.store, dataset, description=description, metadata_fields=metadata_fields
            )

    def list_tags(self) -> list[TagInfo]:
        """See :meth:`KnowledgeAdmin.list_tags`."""
        return tags.list_tags(self.store)

    def create_tag(self, name: str) -> TagInfo:
        """See :meth:`KnowledgeAdmin.create_tag`."""
        with self._writing:
            return tags.create_tag(self.store, name)

    def rename_tag(self, tag_id: str, name: str) -> TagInfo:
        """See :meth:`KnowledgeAdmin.rename_tag`."""
        with self._writing:
            return tags.rename_tag(self.store, tag_id, name)

    def delete_tag(self, tag_id: str) -> TagInfo:
        """See :meth:`KnowledgeAdmin.delete_tag`."""
        with self._writing:
            return tags.delete_tag(self.store, tag_id)

    def bind_tags(self, dataset: str, tag_ids: list[str]) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.bind_tags`."""
        return self._bindings(dataset, tag_ids, bind=True)

    def unbind_tags(self, dataset: str, tag_ids: list[str]) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.unbind_tags`."""
        return self._bindings(dataset, tag_ids, bind=False)

    def _bindings(self, dataset: str, tag_ids: list[str], *, bind: bool) -> DatasetInfo:
        ids = tags.checked_ids(tag_ids)
        with self._writing:
            name = dataset_named(self.store, dataset)
            tags.set_bindings(self.store, name, ids, bind=bind)
        return next(i for i in list_datasets(self.store) if i.name == name)

    def update_document_metadata(
        self, dataset: str, ref: str, metadata: Mapping[str, Any]
    ) -> DocumentInfo:
        """See :meth:`KnowledgeAdmin.update_document_metadata`."""
        with self._writing:
            return update_document_metadata(self.store, dataset, ref, metadata)

    def list_documents(self, dataset: str) -> list[DocumentInfo]:
        """See :meth:`KnowledgeAdmin.list_documents`."""
        return list_documents(self.store, dataset)

    def list_segments(self, dataset: str, ref: str) -> list[SegmentInfo]:
        """See :meth:`KnowledgeAdmin.list_segments`."""
        return segments.list_segments(self.store, find_document(self.store, dataset, ref))

    def create_segments(self, dataset: str, ref: str, contents: list[str]) -> list[SegmentInfo]:
        """See :meth:`KnowledgeAdmin.create_segments`."""
        with self._writing:
            doc = find_document(self.store, dataset, ref)
            return segments.create_segments(self.store, doc, contents)

    def update_segment(self, dataset: str, ref: str, segment_id: str, content: str) -> SegmentInfo:
        """See :meth:`KnowledgeAdmin.update_segment`."""
        with self._writing:
            doc = find_document(self.store, dataset, ref)
            return segments.update_segment(self.store, doc, segment_id, content)

    def delete_segment(self, dataset: str, ref: str, segment_id: str) -> SegmentInfo:
        """See :meth:`KnowledgeAdmin.delete_segment`."""
        with self._writing:
            doc = find_document(self.store, dataset, ref)
            return segments.delete_segment(self.store, doc, segment_id)

    def retrieve(
        self,
        dataset: str,
        query: str,
        *,
        top_k: int,
        score_threshold: float = 0.0,
        condition: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """See :meth:`KnowledgeAdmin.retrieve`."""
        return retrieve(
            self.store,
            dataset,
            query,
            top_k=top_k,
            score_threshold=score_threshold,
            condition=condition,
        )

    def find_document(self, dataset: str, ref: str) -> DocumentInfo:
        """See :meth:`KnowledgeAdmin.find_document`."""
        return find_document(self.store, dataset, ref)

    def upsert_document(
        self,
        dataset: str,
        *,
        name: str,
        data: bytes,
        metadata: Mapping[str, Any] | None = None,
        replace: str | None = None,
    ) -> Upserted:
        """See :meth:`KnowledgeAdmin.upsert_document`."""
        with self._writing:
            return upsert_document(
                self.store, dataset, name=name, data=data, metadata=metadata, replace=replace
            )

    def delete_document(self, dataset: str, ref: str) -> DocumentInfo:
        """See :meth:`KnowledgeAdmin.delete_document`."""
        with self._writing:
            return delete_document(self.store, dataset, ref)

    def status(self) -> KnowledgeStatus:
        """See :meth:`KnowledgeAdmin.status`."""
        settings = self.store.settings
        datasets = list_datasets(self.store)
        with self.store.lock:
            embedder = str(self.store.catalog.embedder or settings.embed.backend)
            dim = int(self.store.catalog.dim or 0)
        location = _store_name(settings)
        return KnowledgeStatus(
            location=location,
            embedder=embedder,
            dimensions=dim,
            datasets=datasets,
            stored_chunks=self.store.count() if dim else 0,
        )

    def close(self) -> None:
        """Nothing to release (the store belongs to whoever opened it)."""


__all__ = [
    "DatasetInfo",
    "DocumentInfo",
    "LocalAdmin",
    "ManageError",
    "Upserted",
    "create_dataset",
    "dataset_named",
    "delete_dataset",
    "delete_document",
    "find_document",
    "list_datasets",
    "list_documents",
    "retrieve",
    "update_dataset",
    "update_document_metadata",
    "upsert_document",
]
