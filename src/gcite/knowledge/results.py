"""Stored point payloads -> Dify Knowledge Retrieval ``result`` items (1.x shape).

Shape (dify-protocol.md §2, internal dataset item, new version)::

    {"content": str, "title": str (document name), "files": None,
     "metadata": {"_source": "knowledge", "dataset_id", "dataset_name",
                  "document_id", "document_name", "data_source_type": "upload_file",
                  "segment_id", "retriever_from": "workflow", "score": float 0-1,
                  "segment_hit_count": 0, "segment_word_count": int,
                  "segment_position": int (1-based), "segment_index_node_hash": str,
                  "doc_metadata": {"document_title", "source_file_url",
                                   "access_roles", ...other fields},
                  "position": int (1..n, after sorting by score)}}

Items are sorted by descending score and numbered ``position`` 1..n, as Dify does.
Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def result_item(payload: Mapping[str, Any], score: float) -> dict[str, Any]:
    """One KR ``result`` item from a stored payload and a 0-1 score (``position`` unset)."""
    doc_metadata = dict(payload.get("doc_metadata") or {})
    return {
        "metadata": {
            "_source": "knowledge",
            "dataset_id": str(payload.get("dataset_id", "")),
            "dataset_name": str(payload.get("dataset_name", "")),
            "document_id": str(payload.get("document_id", "")),
            "document_name": str(payload.get("document_name", "")),
            "data_source_type": "upload_file",
            "segment_id": str(payload.get("segment_id", "")),
            "retriever_from": "workflow",
            "score": round(min(max(float(score), 0.0), 1.0), 6),
            "segment_hit_count": 0,
            "segment_word_count": int(payload.get("word_count", 0)),
            "segment_position": int(payload.get("segment_position", 0)),
            "segment_index_node_hash": str(payload.get("content_hash", "")),
            "doc_metadata": doc_metadata,
            "position": 0,
        },
        "title": str(payload.get("document_name", "")),
        "files": None,
        "content": str(payload.get("content", "")),
    }


def rank(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sort by descending ``metadata.score`` (stable) and set ``position`` = 1..n."""
    ordered = sorted(items, key=lambda item: -float(item["metadata"].get("score") or 0.0))
    for index, item in enumerate(ordered, start=1):
        item["metadata"]["position"] = index
    return ordered


__all__ = ["rank", "result_item"]
