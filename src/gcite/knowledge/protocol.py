"""The knowledge-retrieval seam: what the chatflow and the External Knowledge API need.

:class:`KnowledgeStore` is a :class:`typing.Protocol`; :func:`gcite.knowledge.open_store`
returns one (:class:`gcite.knowledge.store.HybridStore` on Qdrant Edge or qdrant-client),
and every implementation passes :mod:`gcite.testing.store_contract`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from gcite.knowledge.filters import Node


@runtime_checkable
class KnowledgeStore(Protocol):
    """Hybrid search over one knowledge base, with the seeds' role rule (platform design §2.1.1).

    ``search`` returns Dify Knowledge Retrieval ``result`` items (1.x shape,
    dify-protocol.md §2), best first, ``metadata.position`` 1..n. ``roles=None``: no role
    filter (trusted internal callers only); ``roles=[]``: a user with no roles (sees only
    documents without ``access_roles``). ``condition``: a Dify metadata condition, raw
    or parsed (:func:`gcite.knowledge.filters.parse_condition`). Errors:
    :class:`~gcite.errors.FilterError` (bad condition / roles),
    :class:`~gcite.errors.StoreError` (unknown dataset, store unusable).
    Lifecycle: :meth:`close` (idempotent; also a context manager). Synchronous: call it
    from a worker thread in async code.
    """

    def search(
        self,
        query: str,
        *,
        dataset: str | None = None,
        roles: Sequence[str] | None = None,
        condition: Mapping[str, Any] | Node | None = None,
        top_k: int = 5,
        score_threshold: float = 0.0,
    ) -> list[dict[str, Any]]:
        """Search; see the class docstring for shapes and errors."""
        ...

    def datasets(self) -> list[str]:
        """Names of the datasets in this store, sorted."""
        ...

    def visible_document_ids(
        self, document_ids: Sequence[str], *, roles: Sequence[str], dataset: str | None = None
    ) -> set[str]:
        """The ids among ``document_ids`` still stored and visible to ``roles``."""
        ...

    def close(self) -> None:
        """Release the store. Idempotent."""
        ...


__all__ = ["KnowledgeStore"]
