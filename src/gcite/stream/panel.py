"""The citation panel model: the cited chunks, in display order, each once.

Mobile design document §4.3 and §5.1: the panel (摘要栏) is built by walking the
idMap in insertion order and looking each raw id up in ``chunkMetadataMap``
(``chunk_metadata`` indexed by ``id``) — never by listing all of ``chunk_metadata``.
Also the fallback of §3.4: when no ``chunk_metadata`` arrived, the chunks are rebuilt
from ``message_end.metadata.retriever_resources`` and the cited ids looked up in them
(a cited id with no matching resource gets ``chunk=None``). Pure functions.
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
    """A ``UnifiedChunk``-shaped dict from one ``retriever_resources`` item.

    Dify's ``RetrievalSourceMetadata`` (dify-protocol.md §1.6) knows only knowledge-base
    hits: ``source_type`` ``"rag"``, ``document_title`` from ``document_name`` / ``title``,
    ``display_subtitle`` from ``dataset_name``, and ``id`` = ``position`` (or ``position``
    given here when absent). When ``doc_metadata`` carries G-Cite fields (as the gcite
    service writes them: ``chunk_id``, ``source_type``, ``document_title``,
    ``display_subtitle``, ``url``), those win, so the raw ids of the answer's markers match.
    """
    meta = resource.get("doc_metadata")
    if not isinstance(meta, dict):
        meta = {}
    raw_position = resource.get("position")
    if isinstance(raw_position, int) and not isinstance(raw_position, bool) and raw_position > 0:
        position = raw_position
    chunk_id = meta.get("chunk_id")
    source_type = meta.get("source_type")
    subtitle = meta.get("display_subtitle")
    title = meta.get("document_title") or resource.get("document_name") or resource.get("title")
    url = meta.get("url") or meta.get("source_file_url") or ""
    return {
        "id": str(chunk_id) if chunk_id not in (None, "") else str(position),
        "source_type": source_type if source_type in ("rag", "web") else "rag",
        "document_title": str(title or ""),
        "display_subtitle": subtitle
        if isinstance(subtitle, str)
        else str(resource.get("dataset_name") or ""),
        "content": str(resource.get("content") or ""),
        "score": resource.get("score"),
        "url": str(url),
        "source_file_url": str(meta.get("source_file_url") or ""),
        "document_name": str(resource.get("document_name") or ""),
        "dataset_name": str(resource.get("dataset_name") or ""),
    }


def chunks_from_retriever_resources(resources: Any) -> list[dict[str, Any]]:
    """``chunk_metadata`` rebuilt from ``message_end.metadata.retriever_resources``.

    The mobile §3.4 fallback when no ``node_finished`` carried ``chunk_metadata``:
    :func:`build_panel` then looks the cited ids up in these chunks. Anything that is not
    a list gives ``[]``; non-dict items are skipped.
    """
    if not isinstance(resources, list):
        return []
    return [
        chunk_from_retriever_resource(resource, k + 1)
        for k, resource in enumerate(resources)
        if isinstance(resource, dict)
    ]
