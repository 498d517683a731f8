"""The arguments of :meth:`KnowledgeStore.search`, checked and clamped one way for every store.

The Qdrant/pgvector store, the remote store and the in-memory test store all take a
query, roles, ``top_k`` and ``score_threshold``; these functions give each the same
bounds and the same errors: a query that is not a string and roles that are not a list
of strings raise :class:`~gcite.errors.FilterError`; a query is stripped and cut to
:data:`MAX_QUERY_CHARS` characters; ``top_k`` is clamped to 1-:data:`MAX_TOP_K`,
``score_threshold`` to 0-1; an unknown dataset is a :class:`~gcite.errors.StoreError`
naming the ones there are. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gcite.errors import FilterError, StoreError

MAX_TOP_K = 100
"""Most results one search returns (the External Knowledge API's limit too)."""
MAX_QUERY_CHARS = 2000
"""Characters of a query a store searches with (the rest is cut off)."""


def query_text(query: Any) -> str:
    """``query`` stripped and cut to :data:`MAX_QUERY_CHARS` (``""``: nothing to search)."""
    if not isinstance(query, str):
        raise FilterError(f"query 必须是字符串，得到 {type(query).__name__}")
    return query.strip()[:MAX_QUERY_CHARS]


def check_roles(roles: Sequence[str] | None) -> None:
    """``roles`` must be ``None`` (no role filter) or a list of strings."""
    if roles is not None and (isinstance(roles, str) or not all(isinstance(r, str) for r in roles)):
        raise FilterError("roles 必须是字符串列表")


def clamp_top_k(top_k: Any) -> int:
    """``top_k`` as an int in 1-:data:`MAX_TOP_K` (``ValueError`` / ``TypeError`` for a
    value that is no number)."""
    return min(max(int(top_k), 1), MAX_TOP_K)


def clamp_threshold(score_threshold: Any) -> float:
    """``score_threshold`` as a float in 0-1."""
    return min(max(float(score_threshold), 0.0), 1.0)


def unknown_dataset(dataset: str, known: Iterable[str]) -> StoreError:
    """The error for a search in a dataset the store does not have."""
    return StoreError(f"知识库中没有数据集 {dataset!r}（现有: {', '.join(known)}）")


__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_TOP_K",
    "check_roles",
    "clamp_threshold",
    "clamp_top_k",
    "query_text",
    "unknown_dataset",
]
