"""The citation panel model: the cited chunks, in display order, each once.

Mobile design document §4.3 and §5.1: the panel (摘要栏) is built by walking the
idMap in insertion order and looking each raw id up in ``chunkMetadataMap``
(``chunk_metadata`` indexed by ``id``) — never by listing all of ``chunk_metadata``.
Also the fallback of §3.4: when no ``chunk_metadata`` arrived, Dify's
``message_end.metadata.retriever_resources`` become panel entries (all of them,
so the panel may list more sources than the answer cites). Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict


class PanelEntry(TypedDict):
    """One panel row: display index (from 1), raw chunk id, and the chunk's metadata.

    ``chunk`` is the ``UnifiedChunk`` dict from ``chunk_metadata`` (fields such as
    ``source_type``, ``document_title``, ``display_subtitle``, ``url``), or ``None``
    when no metadata is known for that id.
    """

    idx: int
    raw_id: str
    chunk: dict[str, Any] | None


def chunk_map(
    chunk_metadata: Sequence[Any] | Mapping[str, Any] | None,
) -> dict[str, dict[str, Any]]:
    """``chunkMetadataMap`` (mobile §3.3): chunk dicts keyed by ``str(chunk["id"])``.

    Accepts the ``chunk_metadata`` list, or an already keyed dict. Items that are not
    dicts, or list items without an ``id``, are skipped; for a repeated id the first wins.
    """
    out: dict[str, dict[str, Any]] = {}
    if chunk_metadata is None:
        return out
    if isinstance(chunk_metadata, Mapping):
        for key, chunk in chunk_metadata.items():
            if isinstance(chunk, dict):
                out.setdefault(str(key), chunk)
        return out
    for chunk in chunk_metadata:
        if isinstance(chunk, dict) and chunk.get("id") not in (None, ""):
            out.setdefault(str(chunk["id"]), chunk)
    return out


def build_panel(
    citations: Iterable[tuple[str, int]] | Iterable[Sequence[Any]],
    chunk_metadata: list[dict[str, Any]] | dict[str, dict[str, Any]],
) -> list[PanelEntry]:
    """Panel rows for ``citations`` (``[(raw_id, idx), ...]`` from the parser).

    Sorted by display index, one row per raw id (the first pair wins), each with its
    chunk from ``chunk_metadata`` (a list of ``UnifiedChunk`` dicts or a dict keyed by
    id), or ``None`` when the id has no metadata.
    """
    chunks = chunk_map(chunk_metadata)
    rows: dict[str, int] = {}
    for pair in citations:
        raw_id, idx = str(pair[0]), int(pair[1])
        rows.setdefault(raw_id, idx)
    ordered = sorted(rows.items(), key=lambda item: item[1])
    return [{"idx": idx, "raw_id": raw_id, "chunk": chunks.get(raw_id)} for raw_id, idx in ordered]


def chunk_from_retriever_resource(resource: Mapping[str, Any], position: int) -> dict[str, Any]:
    """A ``UnifiedChunk``-shaped dict from one Dify ``retriever_resources`` item.

    Dify's ``RetrievalSourceMetadata`` (dify-protocol.md §1.6) knows only knowledge
    base hits: ``source_type`` is ``"rag"``, ``document_title`` is ``title`` or
    ``document_name``, ``display_subtitle`` is ``dataset_name``; ``id`` is the
    resource's ``position`` (or ``position`` given here when absent).
    """
    raw_position = resource.get("position")
    pos = raw_position if isinstance(raw_position, int) and raw_position > 0 else position
    title = resource.get("title") or resource.get("document_name") or ""
    doc_metadata = resource.get("doc_metadata")
    url = ""
    if isinstance(doc_metadata, dict):
        url = str(doc_metadata.get("source_file_url") or doc_metadata.get("url") or "")
    return {
        "id": str(pos),
        "source_type": "rag",
        "document_title": str(title),
        "display_subtitle": str(resource.get("dataset_name") or ""),
        "content": str(resource.get("content") or ""),
        "score": resource.get("score"),
        "url": url,
        "document_name": str(resource.get("document_name") or ""),
        "dataset_name": str(resource.get("dataset_name") or ""),
    }


def panel_from_retriever_resources(resources: Any) -> list[PanelEntry]:
    """The §3.4 fallback panel: every retriever resource in order, numbered from 1.

    ``resources`` is ``message_end.metadata.retriever_resources``; anything that is not
    a list gives ``[]`` and non-dict items are skipped.
    """
    if not isinstance(resources, list):
        return []
    entries: list[PanelEntry] = []
    for resource in resources:
        if not isinstance(resource, dict):
            continue
        chunk = chunk_from_retriever_resource(resource, len(entries) + 1)
        entries.append({"idx": len(entries) + 1, "raw_id": chunk["id"], "chunk": chunk})
    return entries
