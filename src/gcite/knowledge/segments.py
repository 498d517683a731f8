"""A document's stored chunks (Dify's segments): listed, added, changed, removed.

Used by :class:`gcite.knowledge.manage.LocalAdmin`. A chunk is found by its id: the ids
ingestion gave a document (:func:`gcite.knowledge.catalog.stable_id` of the document id,
its fingerprint and the chunk's position 1..n), or, once its chunks were edited here,
the ids listed in its catalog entry (``segment_ids``, in order). A new or changed chunk
is embedded and indexed like an ingested one (the document title before its text) and
carries the document's metadata, its ``access_roles`` among them, copied from the
chunks already stored: an edit never changes who may read the document. Ingesting the
document again replaces every chunk (the edits with them), as a new upload does in Dify.

Errors: :class:`~gcite.knowledge.admin.ManageError` (404 unknown document or segment,
400 empty text or a document without chunks to copy metadata from).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from gcite.knowledge.admin import DocumentInfo, ManageError, SegmentInfo
from gcite.knowledge.catalog import stable_id
from gcite.knowledge.chunking import bounded
from gcite.knowledge.filters import filter_payload
from gcite.knowledge.ingest import MAX_TITLE_CHARS
from gcite.knowledge.sparse import document_vector, tokenize
from gcite.knowledge.store import DocumentPayload, HybridStore, PointData

MAX_SEGMENT_CHARS = 20_000


def _entry(store: HybridStore, doc: DocumentInfo) -> dict[str, Any]:
    with store.lock:
        return dict(store.catalog.datasets[doc.dataset]["documents"].get(doc.id, {}))


def segment_ids(store: HybridStore, doc: DocumentInfo) -> list[str]:
    """The ids of ``doc``'s chunks, in order (module docstring)."""
    entry = _entry(store, doc)
    listed = entry.get("segment_ids")
    if isinstance(listed, list):
        return [str(i) for i in listed]
    fingerprint = str(entry.get("hash", ""))
    return [stable_id(doc.id, fingerprint, str(p)) for p in range(1, doc.segments + 1)]


def _info(doc: DocumentInfo, segment_id: str, payload: Mapping[str, Any]) -> SegmentInfo:
    content = str(payload.get("content", ""))
    return SegmentInfo(
        id=segment_id,
        document_id=doc.id,
        position=int(payload.get("segment_position", 0)),
        content=content,
        word_count=len(content),
        tokens=len(tokenize(content)),
        index_node_hash=str(payload.get("content_hash", "")),
        created_at=doc.updated_at or doc.created_at,
    )


def list_segments(store: HybridStore, doc: DocumentInfo) -> list[SegmentInfo]:
    """``doc``'s stored chunks, in order."""
    ids = segment_ids(store, doc)
    payloads = store.payloads(ids) if ids else {}
    return [_info(doc, i, payloads[i]) for i in ids if i in payloads]


def _text(content: Any) -> str:
    if not isinstance(content, str) or not content.strip():
        raise ManageError("分段内容 content 不能为空")
    if len(content) > MAX_SEGMENT_CHARS:
        raise ManageError(f"分段内容不能超过 {MAX_SEGMENT_CHARS} 个字符")
    return content.strip()


def _points(
    store: HybridStore,
    doc: DocumentInfo,
    template: Mapping[str, Any],
    items: Sequence[tuple[str, int, str]],
) -> list[PointData]:
    """Embedded points for ``(segment id, position, text)`` of ``doc``, with the
    metadata of ``template`` (a stored chunk of the same document)."""
    meta = dict(template.get("doc_metadata") or {})
    with store.lock:
        dataset = dict(store.catalog.datasets[doc.dataset])
    title = bounded(str(meta.get("document_title") or ""), MAX_TITLE_CHARS)
    texts = [f"{title}\n{text}" if title else text for _, _, text in items]
    vectors = store.embedder(for_write=True).embed_documents(texts)
    document = DocumentPayload(
        dataset=dataset,
        dataset_name=doc.dataset,
        document_id=doc.id,
        document_name=doc.name,
        doc_metadata=meta,
        lookups=filter_payload(meta),
        version=str(template.get("version") or ""),  # the document's current version
    )
    articles = list(template.get("articles") or [])
    points = []
    for (segment_id, position, text), indexed, vector in zip(items, texts, vectors, strict=True):
        payload = document.chunk(
            segment_id=segment_id, position=position, content=text, articles=articles
        )
        points.append(PointData(segment_id, vector.tolist(), document_vector(indexed), payload))
    return points


def _template(store: HybridStore, doc: DocumentInfo, ids: Sequence[str]) -> dict[str, Any]:
    payloads = store.payloads(ids[:1]) if ids else {}
    if not payloads:
        raise ManageError(f"文档 {doc.name} 没有已存储的分段，不能在这里添加分段；请重新上传文档")
    return next(iter(payloads.values()))


def _save(store: HybridStore, doc: DocumentInfo, ids: list[str]) -> None:
    """Record the edited chunk list (and the document's new size) in the catalog."""
    payloads = store.payloads(ids) if ids else {}
    texts = [str(payloads[i].get("content", "")) for i in ids if i in payloads]
    with store.lock:
        entry = store.catalog.datasets[doc.dataset]["documents"][doc.id]
        entry["segment_ids"] = list(ids)
        entry["segments"] = len(ids)
        entry["hash"] = ""  # the next upload of the file indexes it again
        entry["word_count"] = sum(len(t) for t in texts)
        entry["tokens"] = sum(len(tokenize(t)) for t in texts)
        store.save()
    store.optimize()


def create_segments(
    store: HybridStore, doc: DocumentInfo, contents: Sequence[Any]
) -> list[SegmentInfo]:
    """Add chunks with ``contents`` at the end of ``doc``; returns them."""
    texts = [_text(c) for c in contents]
    if not texts:
        raise ManageError("segments 不能为空")
    ids = segment_ids(store, doc)
    template = _template(store, doc, ids)
    start = max((s.position for s in list_segments(store, doc)), default=0)
    new = [(str(uuid.uuid4()), start + n, text) for n, text in enumerate(texts, 1)]
    store.add_points(_points(store, doc, template, new))
    _save(store, doc, ids + [i for i, _, _ in new])
    payloads = store.payloads([i for i, _, _ in new])
    return [_info(doc, i, payloads[i]) for i, _, _ in new if i in payloads]


def _find(store: HybridStore, doc: DocumentInfo, segment_id: str) -> dict[str, Any]:
    ids = segment_ids(store, doc)
    payload = store.payloads([segment_id]).get(segment_id) if segment_id in ids else None
    if payload is None:
        raise ManageError("Segment not found.", status=404)
    return payload


def update_segment(
    store: HybridStore, doc: DocumentInfo, segment_id: str, content: Any
) -> SegmentInfo:
    """Replace the text of one chunk of ``doc`` (same id and position)."""
    text = _text(content)
    payload = _find(store, doc, segment_id)
    position = int(payload.get("segment_position", 0))
    store.add_points(_points(store, doc, payload, [(segment_id, position, text)]))
    _save(store, doc, segment_ids(store, doc))
    return _info(doc, segment_id, store.payloads([segment_id])[segment_id])


def delete_segment(store: HybridStore, doc: DocumentInfo, segment_id: str) -> SegmentInfo:
    """Remove one chunk of ``doc`` (the document's other chunks stay as they are)."""
    removed = _info(doc, segment_id, _find(store, doc, segment_id))
    ids = [i for i in segment_ids(store, doc) if i != segment_id]
    payloads = store.payloads(ids) if ids else {}
    kept = [i for i in ids if i in payloads]
    store.delete_segments(doc.id, [segment_id])
    _save(store, doc, kept)
    return removed


__all__ = [
    "MAX_SEGMENT_CHARS",
    "create_segments",
    "delete_segment",
    "list_segments",
    "segment_ids",
    "update_segment",
]
