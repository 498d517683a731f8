"""Stored answers under the caller's *current* visibility: redact what they may no longer see.

A key can lose a role, and a document's roles can be tightened by re-ingest, after an
answer was stored. Every knowledge-base document retrieved for a turn is recorded with
the message (its ``chunk_metadata``: every merged chunk, cited or not), and whenever a
stored message is read back - the history sent to the model, ``GET /v1/messages``, both
Plan B endpoints - the documents are checked against the caller's current roles
(``KnowledgeStore.visible_document_ids``):

* an answer built from a document that is no longer visible is replaced by
  :data:`REDACTED_ANSWER` (the answer may use a document without citing it, so no part of
  it is kept), and the item says ``"redacted": true``;
* chunks and ``retriever_resources`` of such documents are left out, and the item says how
  many (``"redacted_chunks"``);
* web chunks are never affected; when the store cannot be asked, every knowledge-base
  document counts as not visible (fail closed).

Pure functions; the service supplies the visible ids.

Source: platform design §2.1.1 (roles), §2.3 (Plan B).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REDACTED_ANSWER = "（这条回答用到的资料你现在已无权查看，内容已隐藏）"


def kb_document_ids(chunks: Iterable[Mapping[str, Any]]) -> list[str]:
    """The knowledge-base document ids of ``chunks`` (web chunks left out), in order."""
    out: list[str] = []
    for chunk in chunks:
        if chunk.get("source_type") == "web":
            continue
        document_id = str(chunk.get("document_id") or "")
        if document_id and document_id not in out:
            out.append(document_id)
    return out


def hidden_documents(chunks: Iterable[Mapping[str, Any]], visible: set[str]) -> set[str]:
    """The knowledge-base documents of ``chunks`` not in ``visible``."""
    return {d for d in kb_document_ids(chunks) if d not in visible}


def _kept(items: Sequence[Mapping[str, Any]], hidden: set[str]) -> list[dict[str, Any]]:
    return [
        dict(item)
        for item in items
        if item.get("source_type") == "web" or str(item.get("document_id") or "") not in hidden
    ]


def redact_message(
    item: dict[str, Any], chunks: Sequence[Mapping[str, Any]], visible: set[str]
) -> dict[str, Any]:
    """A ``GET /v1/messages`` item under ``visible`` (see the module docstring)."""
    hidden = hidden_documents(chunks, visible)
    if not hidden:
        return item
    out = dict(item)
    out["answer"] = REDACTED_ANSWER
    resources = item.get("retriever_resources") or []
    out["retriever_resources"] = _kept(resources, hidden)
    out["redacted"] = True
    out["redacted_chunks"] = len(chunks) - len(_kept(chunks, hidden))
    return out


def redact_chunks(item: dict[str, Any], visible: set[str]) -> dict[str, Any]:
    """A Plan B item (``chunk_metadata``, ``cited_ids``) under ``visible``."""
    chunks: list[dict[str, Any]] = list(item.get("chunk_metadata") or [])
    hidden = hidden_documents(chunks, visible)
    if not hidden:
        return item
    kept = _kept(chunks, hidden)
    kept_ids = {str(c.get("id")) for c in kept}
    out = dict(item)
    out["chunk_metadata"] = kept
    out["chunk_count"] = len(kept)
    out["cited_ids"] = [i for i in item.get("cited_ids") or [] if str(i) in kept_ids]
    out["redacted"] = True
    out["redacted_chunks"] = len(chunks) - len(kept)
    out["gcite_verification"] = None  # it quotes the answer and the chunks
    return out


__all__ = [
    "REDACTED_ANSWER",
    "hidden_documents",
    "kb_document_ids",
    "redact_chunks",
    "redact_message",
]
