"""The history rules of a multi-turn conversation (seed §6), pure plus one store check.

* :func:`earlier_turns` - from the stored earlier turns (oldest first, failed ones left
  out) to the prompt's history (question, answer without its reasoning block) and the
  ``cited_before`` list (the UnifiedChunks earlier answers cited);
* :func:`visible_context` - the visibility re-check: earlier answers were given under the
  roles the caller had then, from the documents as they were then. Before they reach the
  prompt, the knowledge-base documents they used are checked again with the caller's
  CURRENT roles (:meth:`KnowledgeStore.visible_document_ids`): a chunk whose document is
  no longer visible is left out of ``cited_before`` (content and title), and an earlier
  answer whose turn retrieved such a document (cited or not) is left out of the history
  (its question stays).
  Web chunks are public and kept. When the check cannot be made (no store, a store
  error), every knowledge-base chunk and every answer that quoted one is left out
  (fail closed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gcite.chatflow.seams import KnowledgeStore
from gcite.generate.prompt import strip_reasoning

log = logging.getLogger("gcite.chatflow")


@dataclass(frozen=True)
class PastTurn:
    """One earlier turn as stored: question, answer (markers kept), whether it failed, the
    merge node's ``chunk_metadata`` and the raw ids the answer cited."""

    query: str
    answer: str
    failed: bool = False
    chunk_metadata: list[dict[str, Any]] = field(default_factory=list)
    cited_ids: list[str] = field(default_factory=list)


@dataclass
class History:
    """Earlier turns for the prompt: ``turns`` ``[{"query", "answer", "document_ids"}]``
    (``document_ids``: every knowledge-base document retrieved for the turn, cited or not)
    and ``cited_before``
    (UnifiedChunks cited earlier, in order)."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    cited_before: list[dict[str, Any]] = field(default_factory=list)


def earlier_turns(past: Sequence[PastTurn]) -> History:
    """The history of ``past`` (oldest first); failed turns are left out."""
    history = History()
    for turn in past:
        if turn.failed:
            continue
        by_id = {str(c.get("id")): c for c in turn.chunk_metadata}
        cited = [by_id[i] for i in turn.cited_ids if i in by_id]
        history.cited_before.extend(cited)
        # every knowledge-base document retrieved for that turn, cited or not: an answer
        # can use a chunk without citing it
        documents = list(
            dict.fromkeys(
                str(c.get("document_id") or "")
                for c in turn.chunk_metadata
                if c.get("source_type") != "web" and c.get("document_id")
            )
        )
        # the reasoning of an earlier answer is never history: not in the prompt, not in
        # the follow-up rewrite
        answer = strip_reasoning(turn.answer)
        history.turns.append({"query": turn.query, "answer": answer, "document_ids": documents})
    return history


async def visible_documents(
    get_store: Callable[[], KnowledgeStore] | None,
    document_ids: list[str],
    *,
    roles: Sequence[str],
    dataset: str | None,
) -> set[str]:
    """Which of ``document_ids`` ``roles`` may see now; the empty set when it cannot tell."""
    if not document_ids or get_store is None:
        return set()
    try:
        store = await asyncio.to_thread(get_store)
        visible: set[str] = await asyncio.to_thread(
            store.visible_document_ids, document_ids, roles=list(roles), dataset=dataset
        )
    except Exception as exc:  # fail closed: nothing earlier from the knowledge base
        log.warning("earlier turns left out, visibility check failed: %s", exc)
        return set()
    return visible


async def visible_context(
    history: History,
    get_store: Callable[[], KnowledgeStore] | None,
    *,
    roles: Sequence[str],
    dataset: str | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(history, cited_before)`` for the prompt, after the visibility re-check."""
    cited = history.cited_before
    wanted = {str(c.get("document_id") or "") for c in cited if c.get("source_type") != "web"}
    for past in history.turns:
        wanted.update(str(d) for d in past.get("document_ids") or ())
    visible = await visible_documents(get_store, sorted(wanted), roles=roles, dataset=dataset)
    kept_cited = [
        c
        for c in cited
        if c.get("source_type") == "web" or str(c.get("document_id") or "") in visible
    ]
    kept: list[dict[str, Any]] = []
    for past in history.turns:
        turn = {k: v for k, v in past.items() if k != "document_ids"}
        if not all(str(d) in visible for d in past.get("document_ids") or ()):
            turn.pop("answer", None)
        kept.append(turn)
    return kept, kept_cited


__all__ = ["History", "PastTurn", "earlier_turns", "visible_context", "visible_documents"]
