"""One small typed async function per node of the seeds' chatflow (platform design §2.2).

* :func:`search_knowledge` - knowledge retrieval (Dify KR ``result`` items, roles applied;
  blocking: the chatflow runs it on the scheduler's search threads);
* :func:`search_web` - web search (the provider's raw payload);
* :func:`merge` - the merge node “Chunk编号” (seed §3; :func:`gcite.merge.merge_chunks`);
* :func:`generate` - the LLM node: the backend's stream of deltas.

:func:`branch` runs a retrieval node with its own timeout and turns any failure into a
:class:`Branch` error, so a failing branch degrades the answer instead of failing it.
No HTTP, no SQL here: the seams are :mod:`gcite.chatflow.seams`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gcite.chatflow.seams import KnowledgeStore, LLMBackend, Reasoning, Usage, WebSource
from gcite.generate.backends import aclose_stream
from gcite.generate.fallback import FellBack
from gcite.merge import MergeResult, merge_chunks

T = TypeVar("T")

HIDDEN_FIELDS = frozenset({"access_roles"})
"""Metadata keys chat clients never see (who may read a document is the server's business)."""


def without_hidden(value: Any) -> Any:
    """A copy of ``value`` without :data:`HIDDEN_FIELDS` keys in any nested dict.

    Applied to the knowledge-base result items as soon as the knowledge branch returns, so
    the node outputs, ``chunk_metadata``, cited resources, stored messages and Plan B never
    carry ``access_roles``.
    """
    if isinstance(value, dict):
        return {
            k: without_hidden(v) if isinstance(v, dict | list) else v
            for k, v in value.items()
            if k not in HIDDEN_FIELDS
        }
    if isinstance(value, list):
        return [without_hidden(v) if isinstance(v, dict | list) else v for v in value]
    return value


@dataclass
class Branch(Generic[T]):
    """The outcome of one retrieval branch: ``value`` or ``error``, ``elapsed`` seconds."""

    value: T | None = None
    error: str | None = None
    elapsed: float = 0.0


async def branch(work: Awaitable[T], timeout: float) -> Branch[T]:
    """Await ``work`` within ``timeout`` seconds; any failure becomes ``Branch.error``
    (``"timeout after 5s"``, ``"SourceTimeout: ..."``). Never raises but on cancellation."""
    start = time.monotonic()
    try:
        value = await asyncio.wait_for(work, timeout=timeout)
    except TimeoutError:
        return Branch(error=f"timeout after {timeout:g}s", elapsed=time.monotonic() - start)
    except Exception as exc:  # a source bug must not take the answer down
        return Branch(error=f"{type(exc).__name__}: {exc}", elapsed=time.monotonic() - start)
    return Branch(value=value, elapsed=time.monotonic() - start)


def search_knowledge(
    get_store: Callable[[], KnowledgeStore],
    query: str,
    *,
    roles: Sequence[str],
    dataset: str | None,
    top_k: int,
    score_threshold: float,
) -> list[dict[str, Any]]:
    """Knowledge retrieval, blocking (the store opened by ``get_store`` if need be, then
    searched): Dify KR ``result`` items visible to ``roles``, without hidden metadata.
    Raises what the store raises (``StoreError``, ``FilterError``)."""
    items = get_store().search(
        query, dataset=dataset, roles=list(roles), top_k=top_k, score_threshold=score_threshold
    )
    if not isinstance(items, list):
        raise TypeError("knowledge store returned no list")
    return [without_hidden(item) for item in items]


async def search_web(source: WebSource, query: str, *, count: int) -> Any:
    """Web search node: the provider's raw payload (merge node input ``web_chunks``)."""
    return await source.search(query, count=count)


def merge(rag_items: list[Any], web_payload: Any, *, max_web_results: int | None) -> MergeResult:
    """The merge node (seed §3): ``formatted_chunks``, ``chunk_count``, ``chunk_metadata``
    (without hidden metadata). Pure; never raises on bad input."""
    merged = merge_chunks(rag_items, web_payload, max_web_results=max_web_results)
    chunks = [without_hidden(dict(c)) for c in merged["chunk_metadata"]]
    return {
        "formatted_chunks": merged["formatted_chunks"],
        "chunk_count": merged["chunk_count"],
        "chunk_metadata": chunks,
    }


async def generate(
    backend: LLMBackend,
    messages: list[dict[str, str]],
    *,
    chunks: list[dict[str, Any]],
    query: str,
    usage: Usage,
) -> AsyncIterator[str | Reasoning | FellBack]:
    """The LLM node: non-empty answer deltas (``str``), :class:`Reasoning` pieces and the
    :class:`~gcite.generate.fallback.FellBack` notice of an offline fallback.

    The backend's stream is always closed, also when the consumer stops early or is
    cancelled (that closes the model call). Raises ``LLMError``. The chatflow passes the
    backend paced by its scheduler (:class:`gcite.chatflow.scheduler.PacedBackend`).
    """
    stream = backend.stream(messages, chunks=chunks, query=query, usage=usage)
    try:
        async for delta in stream:
            if isinstance(delta, Reasoning):
                if delta.text:
                    yield delta
            elif (isinstance(delta, str) and delta) or isinstance(delta, FellBack):
                yield delta
    finally:
        await aclose_stream(stream)


__all__ = [
    "HIDDEN_FIELDS",
    "Branch",
    "branch",
    "generate",
    "merge",
    "search_knowledge",
    "search_web",
    "without_hidden",
]
