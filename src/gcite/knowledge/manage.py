"""Knowledge-base management: datasets and documents listed, created, updated, deleted.

One layer used by the CLI (``gcite datasets``, ``gcite documents``, ``gcite status``) and
by the running service's management API (:mod:`gcite.service.knowledge_api`, Dify's
Knowledge API shape) through :class:`LocalAdmin`, so both see and change the same thing.
Everything goes through a :class:`~gcite.knowledge.store.HybridStore`; handles are
shared per data dir within a process, so the service's open store is the one written (no
second process needed).

Documents created through the API (text or an uploaded file) are kept under
``<data_dir>/uploads/<dataset_id>/<upload>/<file name>`` (one folder per uploaded version)
and ingested with :func:`~gcite.knowledge.ingest.ingest_paths` (same conversion, role
checks, chunking and fingerprints as ``gcite ingest``); the same name in the same dataset
updates the document (same document id, also when an update renames it). Metadata given
with them goes to a sidecar manifest next to the file; an update that gives none keeps the
document's metadata (its roles above all). The new version is swapped in at once
(:meth:`~gcite.knowledge.store.HybridStore.commit_version`) and the previous upload
removed after; :func:`reconcile_uploads` removes what an interrupted write left.

Writes to one dataset wait for each other (:class:`DatasetLocks`, owned by the
:class:`LocalAdmin`); writes to different datasets run side by side.

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
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
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
    match_document,
)
from gcite.knowledge.catalog import Catalog, stable_id
from gcite.knowledge.convert import SUPPORTED_SUFFIXES
from gcite.knowledge.faults import checkpoint
from gcite.knowledge.ingest import ingest_paths
from gcite.knowledge.store import HybridStore as KnowledgeStore
from gcite.roles import RoleValueError, validate_metadata

UPLOADS = "uploads"
MAX_NAME_CHARS = 120
META_SUFFIX = ".meta.json"
_BAD_NAME = re.compile(r"[\x00-\x1f/\\]")


_TAGS = "\x00tags"  # the lock of the tag table (no dataset name has a control character)


class DatasetLocks:
    """One lock per dataset name: writes to a dataset wait for each other (ingestion
    reads, changes and writes its catalog entry), writes to other datasets do not."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def __call__(self, dataset: str) -> threading.Lock:
        """The lock of ``dataset`` (a name)."""
        with self._guard:
            return self._locks.setdefault(dataset, threading.Lock())


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
    return match_document(list_documents(store, dataset), ref)


def delete_document(
    store: KnowledgeStore, dataset: str, ref: str, *, locks: DatasetLocks | None = None
) -> DocumentInfo:
    """Remove a document's chunks and its catalog entry (one step), then its uploaded copy."""
    name = dataset_named(store, dataset)
    with (locks or DatasetLocks())(name):
        doc = find_document(store, name, ref)

        def unlist(catalog: Catalog) -> None:
            catalog.datasets[doc.dataset]["documents"].pop(doc.id, None)

        store.remove_document(doc.id, unlist)
        _remove_upload(store.settings, doc.path)
    return doc


def delete_dataset(
    store: KnowledgeStore, dataset: str, *, locks: DatasetLocks | None = None
) -> DatasetInfo:
    """Remove a dataset with all its documents (one step), then its uploads."""
    name = dataset_named(store, dataset)
    with (locks or DatasetLocks())(name):
        info = next(i for i in list_datasets(store) if i.name == name)

        def unlist(catalog: Catalog) -> None:
            # copy on write: searches read the dataset table without the lock
            catalog.datasets = {k: v for k, v in catalog.datasets.items() if k != name}

        store.remove_dataset(name, unlist)
        shutil.rmtree(_upload_dir(store.settings, info.id), True)
    return info


def _uploads(settings: Settings) -> Path:
    return Path(settings.data_dir).expanduser().resolve() / UPLOADS


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
    locks: DatasetLocks | None = None,
) -> DatasetInfo:
    """Change a dataset's description and declared metadata fields (kept in its catalog
    entry); see :meth:`KnowledgeAdmin.update_dataset`."""
    if description is not None and (not isinstance(description, str) or len(description) > 400):
        raise ManageError("数据集描述必须是不超过 400 个字符的文本")
    fields = None if metadata_fields is None else _checked_fields(metadata_fields)
    name = dataset_named(store, dataset)
    with (locks or DatasetLocks())(name), store.lock:
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
    store: KnowledgeStore,
    dataset: str,
    ref: str,
    metadata: Mapping[str, Any],
    *,
    locks: DatasetLocks | None = None,
) -> DocumentInfo:
    """Set metadata values of a document and re-index it from its file; the names not
    given keep their values (its ``access_roles`` too, wherever they came from: the
    catalog records the metadata a document was indexed with). 400 when its file is
    gone, when it was indexed before the catalog recorded metadata (ingest it again
    first), or for refused metadata (nothing changes then)."""
    if not isinstance(metadata, Mapping):
        raise ManageError("doc_metadata 必须是对象")
    with (locks or DatasetLocks())(dataset_named(store, dataset)):
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
            report = ingest_paths(
                [path],
                settings=store.settings,
                dataset=doc.dataset,
                manifest=target,
                document_id=doc.id,
                handles=store.handles,
            )
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
    return _uploads(settings) / dataset_id


def _remove_upload(settings: Settings, path_text: str) -> None:
    """Remove an uploaded file (its upload folder, or the file and its sidecar manifest when
    it lies in the dataset's folder itself); files outside ``uploads/`` stay."""
    if not path_text:
        return
    path = Path(path_text)
    root = _uploads(settings)
    if not path.is_relative_to(root):
        return
    if path.parent.parent.parent == root:  # uploads/<dataset>/<upload>/<file>
        shutil.rmtree(path.parent, True)
    else:
        path.unlink(missing_ok=True)
        Path(str(path) + META_SUFFIX).unlink(missing_ok=True)


def reconcile_uploads(settings: Settings, catalog: Catalog, *, min_age_s: float = 0.0) -> int:
    """Remove what an interrupted write left in ``uploads/``: folders of unknown datasets,
    and files and upload folders no document of the catalog points at. ``min_age_s``:
    leave what changed more recently (another process may be writing it: pgvector).
    Returns how many entries were removed."""
    root = _uploads(settings)
    if not root.is_dir():
        return 0
    kept: dict[str, set[Path]] = {}
    for entry in catalog.datasets.values():
        paths = {Path(str(d.get("path", ""))) for d in entry.get("documents", {}).values()}
        kept[str(entry.get("dataset_id"))] = paths
    now = time.time()
    removed = 0
    for folder in root.iterdir():
        for item in [folder] if folder.name not in kept else list(folder.iterdir()):
            if now - item.stat().st_mtime < min_age_s or _referenced(item, kept, folder):
                continue
            if item.is_dir():
                shutil.rmtree(item, True)
            else:
                item.unlink(missing_ok=True)
            removed += 1
    return removed


def _referenced(item: Path, kept: Mapping[str, set[Path]], folder: Path) -> bool:
    paths = kept.get(folder.name)
    if paths is None:
        return False
    if item.is_dir():
        return any(p.parent == item for p in paths)
    return item in paths or Path(str(item).removesuffix(META_SUFFIX)) in paths


@dataclass(frozen=True)
class PlannedUpsert:
    """What :func:`plan_upsert` found: the dataset (name), the document as it will be
    (id and final name; the replaced one's path, segments and metadata until then) and the
    metadata given (``None``: keep the replaced document's)."""

    dataset: str
    document: DocumentInfo
    metadata: dict[str, Any] | None
    replaces: bool = False

    @property
    def roles_change(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """``(roles before, roles given)`` when this replaces a document with metadata
        whose ``access_roles`` differ from the document's (roles from front matter come on
        top: :attr:`Upserted.roles_change` has the outcome)."""
        if not self.replaces or self.metadata is None:
            return None
        before, after = _roles(self.document.metadata), _roles(self.metadata)
        return (before, after) if before != after else None


def plan_upsert(
    store: KnowledgeStore,
    dataset: str,
    *,
    name: Any,
    metadata: Mapping[str, Any] | None = None,
    replace: str | None = None,
) -> PlannedUpsert:
    """The checks of :func:`upsert_document` that need no conversion: the dataset, the
    name, the document replaced. Raises :class:`ManageError` (404, 400)."""
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ManageError("doc_metadata 必须是对象")
    dataset_name = dataset_named(store, dataset)
    current = _replaced(store, dataset_name, name, replace)
    final = _final_name(name, current)
    if metadata:  # refused at once, before anything is accepted
        try:
            validate_metadata(
                metadata,
                document=final,
                allowed_lookalikes=store.settings.knowledge.role_lookalikes,
            )
        except RoleValueError as exc:
            raise ManageError(str(exc)) from exc
    if current is not None:
        document = dataclasses.replace(current, name=final)
    else:
        with store.lock:
            dataset_id = str(store.catalog.datasets[dataset_name]["dataset_id"])
        document_id = stable_id(dataset_name, str(_upload_dir(store.settings, dataset_id) / final))
        document = DocumentInfo(document_id, final, dataset_name, "", 0, 0, dict(metadata or {}))
    given = dict(metadata) if metadata else None
    return PlannedUpsert(dataset_name, document, given, replaces=current is not None)


def upsert_document(
    store: KnowledgeStore,
    dataset: str,
    *,
    name: Any,
    data: bytes,
    metadata: Mapping[str, Any] | None = None,
    replace: str | None = None,
    locks: DatasetLocks | None = None,
) -> Upserted:
    """Create or replace document ``name`` of ``dataset`` (name or id) from file bytes.

    ``name`` is the file name; its suffix chooses the converter (``.md``, ``.txt``,
    ``.html``, ``.pdf``, ``.docx``; a name without a supported suffix is taken as
    Markdown text and gets ``.md``). A document of that name in the dataset is replaced
    (its id kept). ``metadata`` (``doc_metadata``: e.g. ``access_roles``) overrides front
    matter; ``None`` (or empty) keeps what was given with the replaced document.
    ``replace``: the id or name of the document this replaces (an update, or Dify's
    ``original_document_id``): ``name`` may then be empty (the name is kept) or another
    name (the document is renamed, its id kept).

    The new version is swapped in at once: searches see the old version until then.
    Blocking (embeds the text): call it off the event loop. Raises :class:`ManageError`
    when the document cannot be converted (the converter's status: 413 a conversion limit,
    named in the message; 415 the type; 422 unparsable) or its metadata is refused (400,
    e.g. a malformed ``access_roles``): nothing is changed then, whatever the error.
    """
    planned = plan_upsert(store, dataset, name=name, metadata=metadata, replace=replace)
    return run_upsert(store, planned, data, locks=locks)


def run_upsert(
    store: KnowledgeStore, planned: PlannedUpsert, data: bytes, *, locks: DatasetLocks | None = None
) -> Upserted:
    """Write and ingest a :func:`plan_upsert` (see :func:`upsert_document`)."""
    dataset_name, document_id = planned.dataset, planned.document.id
    with (locks or DatasetLocks())(dataset_name):
        with store.lock:  # the replaced document as it is now (it may have changed since)
            entry = store.catalog.datasets.get(dataset_name)
            if entry is None:
                raise ManageError(
                    f"没有数据集 {dataset_name}", status=404, code="dataset_not_found"
                )
            dataset_id = str(entry["dataset_id"])
            previous = dict(entry["documents"].get(document_id, {}))
        given = planned.metadata if planned.metadata else _kept_metadata(previous)
        folder = _upload_dir(store.settings, dataset_id) / uuid.uuid4().hex
        target = folder / planned.document.name
        report = _ingest_upload(store, dataset_name, target, data, given, document_id)
        if report.unchanged:  # the same version again: the stored one stays
            shutil.rmtree(folder, True)
        elif previous.get("path") and previous["path"] != str(target):
            _remove_upload(store.settings, str(previous["path"]))
        with store.lock:
            stored = store.catalog.datasets[dataset_name]["documents"].get(document_id)
            if stored is not None:
                stored["updated_at"] = int(time.time())
                store.save()
        doc = find_document(store, dataset_name, document_id)
    before = _roles(previous.get("doc_metadata")) if previous else None
    after = _roles(doc.metadata)
    change = (before, after) if before is not None and before != after else None
    return Upserted(doc, created=not previous, roles_change=change)


def _replaced(
    store: KnowledgeStore, dataset: str, name: Any, replace: str | None
) -> DocumentInfo | None:
    """The document an upsert replaces: ``replace``'s, or the one named ``name``."""
    if replace is not None:
        return find_document(store, dataset, replace)
    if not isinstance(name, str) or not name.strip():
        return None
    names = {name.strip(), f"{name.strip()}.md"}
    same = [d for d in list_documents(store, dataset) if d.name in names]
    exact = [d for d in same if d.name == name.strip()]
    found = exact or same
    return found[0] if found else None


def _final_name(name: Any, current: DocumentInfo | None) -> str:
    if current is not None and (not isinstance(name, str) or not name.strip()):
        return current.name
    text = _check_name(name, "文档")
    if Path(text).suffix.lower() not in SUPPORTED_SUFFIXES:
        text += ".md"
    return text


def _kept_metadata(previous: Mapping[str, Any]) -> dict[str, Any]:
    """What was given with the replaced document: the catalog's ``given``, or (a document
    uploaded before the catalog kept it) its sidecar manifest's entry."""
    given = previous.get("given")
    if isinstance(given, Mapping):
        return dict(given)
    path = Path(str(previous.get("path", "")))
    try:
        raw = json.loads(Path(str(path) + META_SUFFIX).read_text(encoding="utf-8"))
        entry = raw["documents"][path.name]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return dict(entry) if isinstance(entry, Mapping) else {}


def _roles(metadata: Any) -> tuple[str, ...]:
    roles = (metadata or {}).get("access_roles") if isinstance(metadata, Mapping) else None
    if roles is None:
        return ()
    return tuple(sorted(str(r) for r in roles)) if isinstance(roles, list) else (str(roles),)


def _ingest_upload(
    store: KnowledgeStore,
    dataset: str,
    target: Path,
    data: bytes,
    given: Mapping[str, Any],
    document_id: str,
) -> Any:
    """Write ``data`` (and ``given`` as its sidecar manifest) to ``target``, a new upload
    folder, and ingest it as ``document_id``; on any failure the folder is removed and
    :class:`ManageError` (or the error) raised."""
    target.parent.mkdir(parents=True, exist_ok=True)
    manifest = Path(str(target) + META_SUFFIX)
    try:
        target.write_bytes(data)
        manifest.write_text(
            json.dumps(
                {"dataset_name": dataset, "documents": {target.name: dict(given)}},
                ensure_ascii=False,
            ),
            encoding="utf-8",
        )
        checkpoint("upload-written")
        report = ingest_paths(
            [target],
            settings=store.settings,
            dataset=dataset,
            manifest=manifest,
            document_id=document_id,
            handles=store.handles,
        )
    except BaseException:
        shutil.rmtree(target.parent, True)
        raise
    if report.failed:
        shutil.rmtree(target.parent, True)
        reason = "; ".join(r for _, r in report.failed)
        status = report.failed_status or 400
        code = _FAILED_CODES.get(status, "invalid_param")
        raise ManageError(f"文档 {target.name} 未能导入: {reason}", status=status, code=code)
    return report


def _store_name(settings: Settings) -> str:
    if settings.knowledge.store == "pgvector":
        from gcite.knowledge.store import pgvector_url

        url = pgvector_url(settings)
        return f"PostgreSQL + pgvector（{url.rsplit('@', 1)[-1]}）"
    return (
        f"Qdrant {settings.knowledge.qdrant_url}"
        if settings.knowledge.qdrant_url
        else "Qdrant Edge（内嵌）"
    )


class LocalAdmin:
    """:class:`~gcite.knowledge.admin.KnowledgeAdmin` over an open store of this process
    (the functions above). Does not own ``store``: :meth:`close` leaves it open (the
    :class:`~gcite.knowledge.access.KnowledgeAccess` that opened it closes it)."""

    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store
        self.locks = DatasetLocks()

    def list_datasets(self) -> list[DatasetInfo]:
        """See :meth:`KnowledgeAdmin.list_datasets`."""
        return list_datasets(self.store)

    def create_dataset(self, name: str) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.create_dataset`."""
        return create_dataset(self.store, name)

    def delete_dataset(self, dataset: str) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.delete_dataset`."""
        return delete_dataset(self.store, dataset, locks=self.locks)

    def update_dataset(
        self,
        dataset: str,
        *,
        description: str | None = None,
        metadata_fields: Mapping[str, str] | None = None,
    ) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.update_dataset`."""
        return update_dataset(
            self.store,
            dataset,
            description=description,
            metadata_fields=metadata_fields,
            locks=self.locks,
        )

    def list_tags(self) -> list[TagInfo]:
        """See :meth:`KnowledgeAdmin.list_tags`."""
        return tags.list_tags(self.store)

    def create_tag(self, name: str) -> TagInfo:
        """See :meth:`KnowledgeAdmin.create_tag`."""
        with self.locks(_TAGS):
            return tags.create_tag(self.store, name)

    def rename_tag(self, tag_id: str, name: str) -> TagInfo:
        """See :meth:`KnowledgeAdmin.rename_tag`."""
        with self.locks(_TAGS):
            return tags.rename_tag(self.store, tag_id, name)

    def delete_tag(self, tag_id: str) -> TagInfo:
        """See :meth:`KnowledgeAdmin.delete_tag`."""
        with self.locks(_TAGS):
            return tags.delete_tag(self.store, tag_id)

    def bind_tags(self, dataset: str, tag_ids: list[str]) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.bind_tags`."""
        return self._bindings(dataset, tag_ids, bind=True)

    def unbind_tags(self, dataset: str, tag_ids: list[str]) -> DatasetInfo:
        """See :meth:`KnowledgeAdmin.unbind_tags`."""
        return self._bindings(dataset, tag_ids, bind=False)

    def _bindings(self, dataset: str, tag_ids: list[str], *, bind: bool) -> DatasetInfo:
        ids = tags.checked_ids(tag_ids)
        name = dataset_named(self.store, dataset)
        with self.locks(name):
            tags.set_bindings(self.store, name, ids, bind=bind)
        return next(i for i in list_datasets(self.store) if i.name == name)

    def update_document_metadata(
        self, dataset: str, ref: str, metadata: Mapping[str, Any]
    ) -> DocumentInfo:
        """See :meth:`KnowledgeAdmin.update_document_metadata`."""
        return update_document_metadata(self.store, dataset, ref, metadata, locks=self.locks)

    def list_documents(self, dataset: str) -> list[DocumentInfo]:
        """See :meth:`KnowledgeAdmin.list_documents`."""
        return list_documents(self.store, dataset)

    def list_segments(self, dataset: str, ref: str) -> list[SegmentInfo]:
        """See :meth:`KnowledgeAdmin.list_segments`."""
        return segments.list_segments(self.store, find_document(self.store, dataset, ref))

    def create_segments(self, dataset: str, ref: str, contents: list[str]) -> list[SegmentInfo]:
        """See :meth:`KnowledgeAdmin.create_segments`."""
        with self.locks(dataset_named(self.store, dataset)):
            doc = find_document(self.store, dataset, ref)
            return segments.create_segments(self.store, doc, contents)

    def update_segment(self, dataset: str, ref: str, segment_id: str, content: str) -> SegmentInfo:
        """See :meth:`KnowledgeAdmin.update_segment`."""
        with self.locks(dataset_named(self.store, dataset)):
            doc = find_document(self.store, dataset, ref)
            return segments.update_segment(self.store, doc, segment_id, content)

    def delete_segment(self, dataset: str, ref: str, segment_id: str) -> SegmentInfo:
        """See :meth:`KnowledgeAdmin.delete_segment`."""
        with self.locks(dataset_named(self.store, dataset)):
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
        return upsert_document(
            self.store,
            dataset,
            name=name,
            data=data,
            metadata=metadata,
            replace=replace,
            locks=self.locks,
        )

    def plan_upsert(
        self,
        dataset: str,
        *,
        name: str,
        metadata: Mapping[str, Any] | None = None,
        replace: str | None = None,
    ) -> PlannedUpsert:
        """:func:`plan_upsert` (the checks made before an asynchronous write is accepted)."""
        return plan_upsert(self.store, dataset, name=name, metadata=metadata, replace=replace)

    def run_upsert(self, planned: PlannedUpsert, data: bytes) -> Upserted:
        """:func:`run_upsert` under this admin's per-dataset locks."""
        return run_upsert(self.store, planned, data, locks=self.locks)

    def delete_document(self, dataset: str, ref: str) -> DocumentInfo:
        """See :meth:`KnowledgeAdmin.delete_document`."""
        return delete_document(self.store, dataset, ref, locks=self.locks)

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
    "DatasetLocks",
    "DocumentInfo",
    "LocalAdmin",
    "ManageError",
    "PlannedUpsert",
    "Upserted",
    "create_dataset",
    "dataset_named",
    "delete_dataset",
    "delete_document",
    "find_document",
    "list_datasets",
    "list_documents",
    "plan_upsert",
    "reconcile_uploads",
    "retrieve",
    "run_upsert",
    "update_dataset",
    "update_document_metadata",
    "upsert_document",
]
