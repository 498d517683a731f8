"""Dify Knowledge API bodies: datasets, documents, uploads, indexing status, list pages.

Pure functions, both ways: the service answers with the ``*_body`` builders, and
:class:`gcite.knowledge.remote_admin.RemoteAdmin` reads another gcite's answers back into
records with the ``*_record`` parsers, so the shapes live in one place. Facts come from
Dify's OpenAPI spec (``../shared/reference/dify-openapi-service.json``, ``/datasets``):
fields gcite has are filled, the others keep Dify's defaults.

A ``batch`` (the id Dify returns for an indexing run) is the time of the run followed by
the document id, so any process of the service can answer its indexing status without
remembering it (:func:`batch_id`, :func:`batch_documents`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from gcite.knowledge.admin import DatasetInfo, DocumentInfo, ManageError

_STAMP = len("20260101000000")


def dataset_body(info: DatasetInfo) -> dict[str, Any]:
    """A Dify ``Dataset`` object for ``info``."""
    return {
        "id": info.id,
        "name": info.name,
        "description": "",
        "provider": "vendor",
        "permission": "only_me",
        "data_source_type": "upload_file",
        "indexing_technique": "high_quality",
        "app_count": 0,
        "document_count": info.documents,
        "word_count": 0,
        "embedding_model": info.embedding_model,
        "embedding_model_provider": "gcite",
        "embedding_available": True,
        "doc_form": "text_model",
        "doc_metadata": [],
        "tags": [],
        "segment_count": info.chunks,
    }


def document_body(doc: DocumentInfo, position: int = 1) -> dict[str, Any]:
    """A Dify ``Document`` object for ``doc`` (indexing is complete when it is listed);
    ``doc_metadata`` in Dify's list shape ``[{"name", "value"}]``."""
    return {
        "id": doc.id,
        "position": position,
        "data_source_type": "upload_file",
        "data_source_info": {"upload_file_id": doc.id},
        "name": doc.name,
        "created_from": "api",
        "created_at": doc.updated_at,
        "tokens": 0,
        "indexing_status": "completed",
        "error": None,
        "enabled": True,
        "disabled_at": None,
        "disabled_by": None,
        "archived": False,
        "display_status": "available",
        "word_count": 0,
        "hit_count": 0,
        "doc_form": "text_model",
        "segment_count": doc.segments,
        "doc_metadata": [{"name": k, "value": v} for k, v in doc.metadata.items()],
    }


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


def upserted_body(doc: DocumentInfo, now: float | None = None) -> dict[str, Any]:
    """The answer of ``create-by-*`` / ``update-by-*``: ``{"document", "batch"}``."""
    return {"document": document_body(doc), "batch": batch_id(doc.id, now)}


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
        updated_at=_int(body.get("created_at")),
        metadata=dict(metadata),
    )


__all__ = [
    "batch_documents",
    "batch_id",
    "dataset_body",
    "dataset_record",
    "doc_metadata",
    "document_body",
    "document_record",
    "indexing_status_body",
    "page_body",
    "page_bounds",
    "upserted_body",
]
