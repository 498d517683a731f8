"""Dify External Knowledge API bodies: records, the records body, the error body.

Pure functions, both ways: the service's ``POST /retrieval``
(:mod:`gcite.service.retrieval`) answers with :func:`build_records` /
:func:`records_body` / :func:`error_body`, and
:class:`gcite.knowledge.remote.RemoteStore` reads another service's records back into
Knowledge Retrieval ``result`` items with :func:`record_item`. Facts:
``../shared/reference/dify-ecosystem.md`` §1 and Dify's ``ExternalDatasetService``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gcite.roles import ROLE_FIELD

DIFY_OVERWRITTEN_KEYS: frozenset[str] = frozenset({"score", "title", "dataset_id", "dataset_name"})
"""``metadata`` keys Dify overwrites on every external record (dify-ecosystem.md §1.4)."""

_TOP_LEVEL_METADATA = ("document_id", "document_name", "segment_position", "segment_id")


def to_record(item: Mapping[str, Any]) -> dict[str, Any]:
    """Turn one knowledge-base result item into an External Knowledge API record.

    ``item``: a Dify Knowledge Retrieval ``result`` item as
    ``KnowledgeStore.search`` returns it (``{content, title, metadata: {score,
    document_id, document_name, segment_position, doc_metadata: {...}}}``).

    Returns ``{"content": str, "score": float 0–1, "title": non-empty str,
    "metadata": dict}``. ``metadata`` holds the document's ``doc_metadata``
    fields plus ``document_id``, ``document_name``, ``segment_position`` (and
    ``segment_id`` when present), always with ``document_title`` and
    ``source_file_url`` keys, and never the keys Dify overwrites
    (:data:`DIFY_OVERWRITTEN_KEYS`). ``title`` is ``document_title``, else the
    document name, else the item's title, else the document id. Never raises.
    Source: dify-ecosystem.md §1.3–1.4.
    """
    raw_meta = item.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    raw_doc = meta.get("doc_metadata")
    doc: Mapping[str, Any] = raw_doc if isinstance(raw_doc, Mapping) else {}

    metadata: dict[str, Any] = {k: v for k, v in doc.items() if k not in DIFY_OVERWRITTEN_KEYS}
    for key in _TOP_LEVEL_METADATA:
        if meta.get(key) is not None:
            metadata[key] = meta[key]
    document_name = _text(metadata.get("document_name")) or _text(item.get("title"))
    title = (
        _text(metadata.get("document_title"))
        or document_name
        or _text(metadata.get("document_id"))
        or "未命名文档"
    )
    if not _text(metadata.get("document_title")):
        metadata["document_title"] = title
    if metadata.get("source_file_url") is None:
        metadata["source_file_url"] = ""
    if not _text(metadata.get("document_id")):
        metadata["document_id"] = document_name or title
    if document_name and not metadata.get("document_name"):
        metadata["document_name"] = document_name

    content = item.get("content")
    return {
        "content": content if isinstance(content, str) else "",
        "score": _score(meta.get("score", item.get("score"))),
        "title": title,
        "metadata": metadata,
    }


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


def _score(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return 0.0
    value = float(raw)
    if not math.isfinite(value):
        return 0.0
    return min(1.0, max(0.0, value))


def build_records(
    items: Sequence[Mapping[str, Any]],
    *,
    top_k: int,
    score_threshold: float,
    expose_roles: bool = False,
) -> list[dict[str, Any]]:
    """Records for the response: mapped, thresholded, sorted by score, cut to ``top_k``.

    ``score_threshold`` 0.0 keeps everything; otherwise ``score >=
    score_threshold``. The store already applies both; this keeps the contract
    (``len <= top_k``, every ``score >= score_threshold``) whatever it returns.
    ``metadata.access_roles`` is left out unless ``expose_roles`` (the retrieval key's
    setting): Dify passes record metadata on to end users (``node_finished``), so role
    names stay server side by default.
    """
    records = [to_record(item) for item in items if isinstance(item, Mapping)]
    if not expose_roles:
        for record in records:
            record["metadata"].pop(ROLE_FIELD, None)
    if score_threshold > 0.0:
        records = [r for r in records if r["score"] >= score_threshold]
    records.sort(key=lambda r: r["score"], reverse=True)
    return records[:top_k]


def records_body(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The 200 answer: ``{"records": [...]}``."""
    return {"records": list(records)}


def error_body(code: int, message: str) -> dict[str, Any]:
    """An error answer: ``{"error_code": int, "error_msg": str}``."""
    return {"error_code": code, "error_msg": message}


def record_item(record: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """An External Knowledge API record back as a Knowledge Retrieval ``result`` item of
    ``dataset`` (the inverse of :func:`to_record`, as far as a record carries it)."""
    raw = record.get("metadata")
    meta: dict[str, Any] = dict(raw) if isinstance(raw, Mapping) else {}
    top = {k: meta.pop(k) for k in _TOP_LEVEL_METADATA if k in meta}
    score = record.get("score")
    value = float(score) if isinstance(score, int | float) and not isinstance(score, bool) else 0.0
    name = str(top.get("document_name") or record.get("title") or "")
    content = record.get("content")
    return {
        "metadata": {
            "_source": "knowledge",
            "dataset_id": dataset,
            "dataset_name": dataset,
            "document_id": str(top.get("document_id", "")),
            "document_name": name,
            "data_source_type": "upload_file",
            "segment_id": str(top.get("segment_id", "")),
            "retriever_from": "workflow",
            "score": min(max(value, 0.0), 1.0),
            "segment_hit_count": 0,
            "segment_word_count": 0,
            "segment_position": int(top.get("segment_position") or 0),
            "segment_index_node_hash": "",
            "doc_metadata": meta,
            "position": 0,
        },
        "title": name,
        "files": None,
        "content": content if isinstance(content, str) else "",
    }


__all__ = [
    "DIFY_OVERWRITTEN_KEYS",
    "build_records",
    "error_body",
    "record_item",
    "records_body",
    "to_record",
]
