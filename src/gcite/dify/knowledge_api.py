"""Dify Knowledge API bodies: datasets, documents, uploads, indexing status, list pages.

Pure functions, both ways: the service answers with the ``*_body`` builders, and
:class:`gcite.knowledge.remote_admin.RemoteAdmin` reads another gcite's answers back into
records with the ``*_record`` parsers, so the shapes live in one place. Facts come from
Dify's source (``api/fields/dataset_fields.py``, ``document_fields.py``,
``segment_fields.py``, ``hit_testing_fields.py``, ``api/controllers/service_api/dataset``)
and its OpenAPI spec (``../shared/reference/dify-openapi-service.json``): every field of
Dify's objects is present; those gcite has are filled, the others keep Dify's defaults.

A ``batch`` (the id Dify returns for an indexing run) is the time of the run followed by
the document id, so any process of the service can answer its indexing status without
remembering it (:func:`batch_id`, :func:`batch_documents`).
"""

from __future__ import annotations

import mimetypes
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gcite.knowledge.admin import DatasetInfo, DocumentInfo, ManageError, SegmentInfo, TagInfo
from gcite.knowledge.results import rank, result_item

_STAMP = len("20260101000000")


#: The account every dataset, document and segment is ``created_by`` (gcite has one
#: operator: whoever holds an admin key); its display name is :data:`AUTHOR`.
ACCOUNT_ID = "6f1c3c2e-0000-4000-8000-00000000a001"
AUTHOR = "gcite"


@dataclass(frozen=True)
class RetrievalSettings:
    """The service's retrieval settings, shown as a dataset's ``retrieval_model_dict``:
    ``top_k``, ``score_threshold`` (0..1, 0 = switched off) and the rerank model
    (``""`` when there is none)."""

    top_k: int = 5
    score_threshold: float = 0.0
    rerank_model: str = ""


def retrieval_model_dict(settings: RetrievalSettings) -> dict[str, Any]:
    """Dify's ``retrieval_model_dict``: gcite always searches hybrid (dense + BM25)."""
    return {
        "search_method": "hybrid_search",
        "reranking_enable": bool(settings.rerank_model),
        "reranking_mode": "reranking_model" if settings.rerank_model else None,
        "reranking_model": {
            "reranking_provider_name": "gcite" if settings.rerank_model else "",
            "reranking_model_name": settings.rerank_model,
        },
        "weights": None,
        "top_k": settings.top_k,
        "score_threshold_enabled": settings.score_threshold > 0,
        "score_threshold": settings.score_threshold,
    }


def metadata_field_id(dataset_id: str, name: str) -> str:
    """The stable id of metadata field ``name`` of a dataset (Dify's ``metadata_id``)."""
    return str(uuid.uuid5(uuid.UUID(ACCOUNT_ID), f"{dataset_id}\x00{name}"))


def metadata_type(value: Any) -> str:
    """Dify's metadata type of ``value``: ``number``, ``time`` (never inferred) or
    ``string`` (lists and everything else)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "number"
    return "string"


def dataset_metadata_fields(dataset_id: str, docs: Sequence[DocumentInfo]) -> list[dict[str, Any]]:
    """``[{"id", "name", "type", "count"}]`` of the metadata names ``docs`` carry, sorted
    by name (``count``: the documents that carry it)."""
    seen: dict[str, tuple[str, int]] = {}
    for doc in docs:
        for name, value in doc.metadata.items():
            kind, count = seen.get(name, (metadata_type(value), 0))
            seen[name] = (kind, count + 1)
    return [
        {"id": metadata_field_id(dataset_id, n), "name": n, "type": t, "count": c}
        for n, (t, c) in sorted(seen.items())
    ]


def dataset_body(
    info: DatasetInfo,
    retrieval: RetrievalSettings | None = None,
    metadata: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A Dify ``Dataset`` object (every field of Dify's ``DatasetDetailResponse``) for
    ``info``; ``metadata``: its fields (:func:`dataset_metadata_fields`, ``count``
    dropped)."""
    return {
        "id": info.id,
        "name": info.name,
        "description": info.description,
        "provider": "vendor",
        "permission": "only_me",
        "data_source_type": "upload_file",
        "indexing_technique": "high_quality",
        "app_count": 0,
        "document_count": info.documents,
        "word_count": info.word_count,
        "created_by": ACCOUNT_ID,
        "author_name": AUTHOR,
        "created_at": info.created_at,
        "updated_by": ACCOUNT_ID,
        "updated_at": info.updated_at or info.created_at,
        "embedding_model": info.embedding_model,
        "embedding_model_provider": "gcite",
        "embedding_available": True,
        "retrieval_model_dict": retrieval_model_dict(retrieval or RetrievalSettings()),
        "summary_index_setting": {
            "enable": False,
            "model_name": None,
            "model_provider_name": None,
            "summary_prompt": None,
        },
        "tags": [{"id": t.id, "name": t.name, "type": TAG_TYPE} for t in info.tags],
        "doc_form": "text_model",
        "external_knowledge_info": None,
        "external_retrieval_model": None,
        "doc_metadata": [{k: m[k] for k in ("id", "name", "type")} for m in metadata],
        "built_in_field_enabled": False,
        "pipeline_id": None,
        "runtime_mode": "general",
        "chunk_structure": None,
        "icon_info": None,
        "is_published": False,
        "total_documents": info.documents,
        "total_available_documents": info.documents,
        "enable_api": True,
        "is_multimodal": False,
        "segment_count": info.chunks,
    }


#: The ``type`` of knowledge tags (Dify's ``TagType.KNOWLEDGE``).
TAG_TYPE = "knowledge"


def tag_body(tag: TagInfo) -> dict[str, Any]:
    """Dify's ``KnowledgeTagResponse``: ``{"id", "name", "type", "binding_count"}``
    (``binding_count`` a string, as Dify answers it)."""
    return {
        "id": tag.id,
        "name": tag.name,
        "type": TAG_TYPE,
        "binding_count": str(tag.binding_count),
    }


def tag_record(body: Mapping[str, Any]) -> TagInfo:
    """A :func:`tag_body` (or a dataset's ``tags`` item) read back as a record."""
    return TagInfo(
        id=str(body.get("id") or ""),
        name=str(body.get("name") or ""),
        binding_count=_int(_number(body.get("binding_count"))),
    )


def _number(value: Any) -> Any:
    return int(value) if isinstance(value, str) and value.isdigit() else value


def document_metadata_list(dataset_id: str, doc: DocumentInfo) -> list[dict[str, Any]]:
    """Dify's ``doc_metadata`` of a document: ``[{"id", "name", "type", "value"}]``
    (a list value, e.g. ``access_roles``, stays a list)."""
    return [
        {
            "id": metadata_field_id(dataset_id, name),
            "name": name,
            "type": metadata_type(value),
            "value": value,
        }
        for name, value in sorted(doc.metadata.items())
    ]


def document_body(doc: DocumentInfo, dataset_id: str = "") -> dict[str, Any]:
    """A Dify ``Document`` object (every field of Dify's ``DocumentResponse``) for
    ``doc``, a document of dataset ``dataset_id`` (indexing is complete when it is
    listed); ``doc_metadata`` is ``null`` for a document given no metadata, as Dify 1.12
    answers (``doc_metadata_details`` is ``None`` then)."""
    return {
        "id": doc.id,
        "position": doc.position or 1,
        "data_source_type": "upload_file",
        "data_source_info": {"upload_file_id": doc.id},
        "data_source_detail_dict": {
            "upload_file": {
                "id": doc.id,
                "name": doc.name,
                "size": 0,
                "extension": _extension(doc.name),
                "mime_type": None,
                "created_by": ACCOUNT_ID,
                "created_at": float(doc.created_at),
            }
        },
        "dataset_process_rule_id": None,
        "name": doc.name,
        "created_from": "api",
        "created_by": ACCOUNT_ID,
        "created_at": doc.created_at,
        "updated_at": doc.updated_at or doc.created_at,
        "tokens": doc.tokens,
        "indexing_status": "completed",
        "error": None,
        "enabled": True,
        "disabled_at": None,
        "disabled_by": None,
        "archived": False,
        "display_status": "available",
        "word_count": doc.word_count,
        "hit_count": 0,
        "doc_form": "text_model",
        "doc_metadata": document_metadata_list(dataset_id, doc) if doc.metadata else None,
        "summary_index_status": None,
        "need_summary": False,
        "segment_count": doc.segments,
    }


#: ``GET .../documents/{id}?metadata=``: what the answer holds (Dify's ``DocumentApi``).
METADATA_CHOICES = ("all", "only", "without")


def document_detail_body(
    doc: DocumentInfo, dataset_id: str, metadata: str = "all"
) -> dict[str, Any]:
    """Dify's answer to ``GET .../documents/{document_id}`` (``DocumentApi.get``), whose
    keys differ from a listed document's: ``metadata="only"`` gives ``{"id", "doc_type",
    "doc_metadata"}``, ``"without"`` every key but ``doc_type`` and ``doc_metadata``,
    ``"all"`` every key. ``metadata`` must be one of :data:`METADATA_CHOICES` (the
    caller answers 400 ``invalid_metadata`` otherwise)."""
    listed = document_body(doc, dataset_id)
    if metadata == "only":
        return {"id": doc.id, "doc_type": None, "doc_metadata": listed["doc_metadata"]}
    updated = listed["updated_at"]
    body: dict[str, Any] = {
        "id": doc.id,
        "position": listed["position"],
        "data_source_type": "upload_file",
        "data_source_info": listed["data_source_detail_dict"],
        "dataset_process_rule_id": None,
        "dataset_process_rule": {"mode": "automatic", "rules": {}},
        "document_process_rule": {},
        "name": doc.name,
        "created_from": "api",
        "created_by": ACCOUNT_ID,
        "created_at": doc.created_at,
        "tokens": doc.tokens,
        "indexing_status": "completed",
        "completed_at": updated,
        "updated_at": updated,
        "indexing_latency": None,
        "error": None,
        "enabled": True,
        "disabled_at": None,
        "disabled_by": None,
        "archived": False,
        "doc_type": None,
        "doc_metadata": listed["doc_metadata"],
        "segment_count": doc.segments,
        "average_segment_length": doc.word_count // doc.segments if doc.segments else 0,
        "hit_count": 0,
        "display_status": "available",
        "doc_form": "text_model",
        "doc_language": None,
        "summary_index_status": None,
        "need_summary": False,
    }
    if metadata == "without":
        del body["doc_type"], body["doc_metadata"]
    return body


def _extension(name: str) -> str:
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


def upload_file_body(doc: DocumentInfo, size: int = 0) -> dict[str, Any]:
    """``GET .../documents/{id}/upload-file``: the document's file (``size`` in bytes,
    0 when not known; gcite serves no download, so ``url`` and ``download_url`` are
    empty)."""
    return {
        "id": doc.id,
        "name": doc.name,
        "size": size,
        "extension": _extension(doc.name),
        "url": "",
        "download_url": "",
        "mime_type": mimetypes.guess_type(doc.name)[0] or "application/octet-stream",
        "created_by": ACCOUNT_ID,
        "created_at": doc.created_at,
    }


def segment_body(segment: SegmentInfo) -> dict[str, Any]:
    """A Dify ``Segment`` object (every field of Dify's ``SegmentResponse``)."""
    return {
        "id": segment.id,
        "position": segment.position,
        "document_id": segment.document_id,
        "content": segment.content,
        "sign_content": segment.content,
        "answer": None,
        "word_count": segment.word_count,
        "tokens": segment.tokens,
        "keywords": [],
        "index_node_id": segment.id,
        "index_node_hash": segment.index_node_hash,
        "hit_count": 0,
        "enabled": True,
        "disabled_at": None,
        "disabled_by": None,
        "status": "completed",
        "created_by": ACCOUNT_ID,
        "created_at": segment.created_at,
        "updated_at": segment.created_at,
        "updated_by": None,
        "indexing_at": segment.created_at,
        "completed_at": segment.created_at,
        "error": None,
        "stopped_at": None,
        "child_chunks": [],
        "attachments": [],
        "summary": None,
    }


def segment_record(body: Mapping[str, Any]) -> SegmentInfo:
    """A :func:`segment_body` read back as a record."""
    content = str(body.get("content") or "")
    return SegmentInfo(
        id=str(body.get("id") or ""),
        document_id=str(body.get("document_id") or ""),
        position=_int(body.get("position")),
        content=content,
        word_count=_int(body.get("word_count")),
        tokens=_int(body.get("tokens")),
        index_node_hash=str(body.get("index_node_hash") or ""),
        created_at=_int(body.get("created_at")),
    )


def retrieve_body(query: str, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``POST /datasets/{id}/retrieve`` (and ``hit-testing``): Dify's
    ``{"query": {"content"}, "records": [{"segment", "child_chunks", "score",
    "tsne_position", "files", "summary"}]}`` of Knowledge Retrieval ``result`` items."""
    records = []
    for item in items:
        meta = item.get("metadata") or {}
        content = str(item.get("content") or "")
        segment = segment_body(
            SegmentInfo(
                id=str(meta.get("segment_id") or ""),
                document_id=str(meta.get("document_id") or ""),
                position=_int(meta.get("segment_position")),
                content=content,
                word_count=_int(meta.get("segment_word_count")) or len(content),
                tokens=0,
                index_node_hash=str(meta.get("segment_index_node_hash") or ""),
            )
        )
        doc_metadata = meta.get("doc_metadata")
        segment["document"] = {
            "id": segment["document_id"],
            "data_source_type": "upload_file",
            "name": str(meta.get("document_name") or item.get("title") or ""),
            "doc_type": None,
            "doc_metadata": doc_metadata if isinstance(doc_metadata, dict) else {},
        }
        records.append(
            {
                "segment": segment,
                "child_chunks": [],
                "score": float(meta.get("score") or 0.0),
                "tsne_position": None,
                "files": [],
                "summary": None,
            }
        )
    return {"query": {"content": query}, "records": records}


def retrieve_items(body: Mapping[str, Any], dataset: DatasetInfo) -> list[dict[str, Any]]:
    """A :func:`retrieve_body` read back as Knowledge Retrieval ``result`` items of
    ``dataset`` (:func:`gcite.knowledge.results.result_item`), best first."""
    items = []
    records = body.get("records")
    for record in records if isinstance(records, list) else []:
        segment = record.get("segment") if isinstance(record, dict) else None
        if not isinstance(segment, dict):
            continue
        raw = segment.get("document")
        document: dict[str, Any] = raw if isinstance(raw, dict) else {}
        payload = {
            "dataset_id": dataset.id,
            "dataset_name": dataset.name,
            "document_id": str(segment.get("document_id") or ""),
            "document_name": str(document.get("name") or ""),
            "segment_id": str(segment.get("id") or ""),
            "segment_position": _int(segment.get("position")),
            "content": str(segment.get("content") or ""),
            "content_hash": str(segment.get("index_node_hash") or ""),
            "word_count": _int(segment.get("word_count")),
            "doc_metadata": dict(document.get("doc_metadata") or {}),
        }
        score = record.get("score")
        items.append(result_item(payload, float(score) if isinstance(score, int | float) else 0.0))
    return rank(items)


def page_bounds(page: str | None, limit: str | None) -> tuple[int, int]:
    """``(page, limit)`` of a list request's query values: page from 1, limit 1..100
    (default 20). Non-integers raise :class:`ManageError` (400)."""
    try:
        number = max(int(page or "1"), 1)
        size = min(max(int(limit or "20"), 1), 100)
    except ValueError as exc:
        raise ManageError("page 和 limit 必须是整数") from exc
    return number, size


def page_body(items: Sequence[dict[str, Any]], page: int, limit: int) -> dict[str, Any]:
    """Dify's list body for one page of ``items`` (every item, already as bodies):
    ``{"data", "has_more", "limit", "total", "page"}``."""
    start = (page - 1) * limit
    return {
        "data": list(items[start : start + limit]),
        "has_more": start + limit < len(items),
        "limit": limit,
        "total": len(items),
        "page": page,
    }


def batch_id(document_id: str, now: float | None = None) -> str:
    """The ``batch`` of an indexing run of ``document_id`` at ``now`` (Unix seconds)."""
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(time.time() if now is None else now)) + (
        document_id
    )


def batch_documents(batch: str) -> list[str]:
    """The document ids of a :func:`batch_id` (empty for a batch gcite did not make)."""
    if len(batch) <= _STAMP or not batch[:_STAMP].isdigit():
        return []
    return [batch[_STAMP:]]


def upserted_body(
    doc: DocumentInfo, dataset_id: str = "", now: float | None = None
) -> dict[str, Any]:
    """The answer of ``create-by-*`` / ``update-by-*``: ``{"document", "batch"}``."""
    return {"document": document_body(doc, dataset_id), "batch": batch_id(doc.id, now)}


def indexing_status_body(docs: Sequence[DocumentInfo]) -> dict[str, Any]:
    """``GET .../documents/{batch}/indexing-status``: every document completed."""
    return {
        "data": [
            {
                "id": d.id,
                "indexing_status": "completed",
                "processing_started_at": d.updated_at,
                "parsing_completed_at": d.updated_at,
                "cleaning_completed_at": d.updated_at,
                "splitting_completed_at": d.updated_at,
                "completed_at": d.updated_at,
                "paused_at": None,
                "error": None,
                "stopped_at": None,
                "completed_segments": d.segments,
                "total_segments": d.segments,
            }
            for d in docs
        ]
    }


def doc_metadata(raw: Any) -> dict[str, Any] | None:
    """``doc_metadata`` of a request as an object: given as one, or as Dify's list of
    ``{"name", "value"}``; ``None`` when absent. Other shapes: :class:`ManageError` (400)."""
    if raw is None:
        return None
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, list):
        out: dict[str, Any] = {}
        for item in raw:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ManageError("doc_metadata 的每一项都需要 name 和 value")
            out[item["name"]] = item.get("value")
        return out
    raise ManageError("doc_metadata 必须是对象或列表")


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def dataset_record(body: Mapping[str, Any]) -> DatasetInfo:
    """A :func:`dataset_body` (another gcite's, or Dify's) read back as a record."""
    return DatasetInfo(
        id=str(body.get("id") or ""),
        name=str(body.get("name") or body.get("id") or ""),
        documents=_int(body.get("document_count")),
        chunks=_int(body.get("segment_count")),
        embedding_model=str(body.get("embedding_model") or ""),
        description=str(body.get("description") or ""),
        created_at=_int(body.get("created_at")),
        updated_at=_int(body.get("updated_at")),
        word_count=_int(body.get("word_count")),
        tags=tuple(tag_record(t) for t in body.get("tags") or () if isinstance(t, Mapping)),
    )


def document_record(body: Mapping[str, Any], dataset: str) -> DocumentInfo:
    """A :func:`document_body` read back as a record of ``dataset`` (a name)."""
    raw = body.get("doc_metadata")
    try:
        metadata = doc_metadata(raw) or {}
    except ManageError:
        metadata = {}
    return DocumentInfo(
        id=str(body.get("id") or ""),
        name=str(body.get("name") or ""),
        dataset=dataset,
        path="",
        segments=_int(body.get("segment_count")),
        updated_at=_int(body.get("updated_at")) or _int(body.get("created_at")),
        metadata=dict(metadata),
        created_at=_int(body.get("created_at")),
        position=_int(body.get("position")),
        word_count=_int(body.get("word_count")),
        tokens=_int(body.get("tokens")),
    )


__all__ = [
    "ACCOUNT_ID",
    "AUTHOR",
    "METADATA_CHOICES",
    "TAG_TYPE",
    "RetrievalSettings",
    "batch_documents",
    "batch_id",
    "dataset_body",
    "dataset_metadata_fields",
    "dataset_record",
    "doc_metadata",
    "document_body",
    "document_detail_body",
    "document_metadata_list",
    "document_record",
    "indexing_status_body",
    "page_body",
    "page_bounds",
    "retrieval_model_dict",
    "retrieve_body",
    "retrieve_items",
    "segment_body",
    "segment_record",
    "tag_body",
    "tag_record",
    "upload_file_body",
    "upserted_body",
]
