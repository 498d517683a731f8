"""The chatflow's three seams, as :class:`typing.Protocol` classes (design.md "Protocols").

* :class:`KnowledgeStore` (defined in :mod:`gcite.knowledge.protocol`): the knowledge
  retrieval branch; synchronous, lifecycle ``close()``.
* :class:`WebSource` (defined here; re-exported by :mod:`gcite.web`): the web search
  branch; async, lifecycle ``aclose()``.
* :class:`LLMBackend` (defined in :mod:`gcite.generate.backends`): the LLM node; async
  stream of text deltas, lifecycle ``warm_up()`` / ``aclose()``.

Every implementation passes its seam's contract suite (:mod:`gcite.testing.store_contract`,
:mod:`gcite.testing.web_contract`, :mod:`gcite.testing.llm_contract`). Importing this
module loads no HTTP client, no SQL and no vector database.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from gcite.generate.backends import LLMBackend, Reasoning, Usage
from gcite.knowledge.protocol import KnowledgeStore


@runtime_checkable
class WebSource(Protocol):
    """A web search source: the seeds' second retrieval branch (platform design §2.2, §4).

    ``name`` is the provider (``"bocha"``, ``"tavily"``, ``"baidu"``, ``"offline"``).
    :meth:`search` returns the provider's raw payload with at most ``count`` results,
    fed unchanged to the merge node as ``web_chunks``; it raises
    :class:`~gcite.errors.SourceTimeout`, :class:`~gcite.errors.SourceAuthError` or
    :class:`~gcite.errors.SourceUnavailable` and nothing else. :meth:`aclose` releases
    connections and files (safe to call twice).
    """

    name: str

    async def search(self, query: str, *, count: int) -> Any:
        """Search for ``query``; the provider's raw payload."""
        ...

    async def aclose(self) -> None:
        """Release connections and files. Safe to call twice."""
        ...


__all__ = ["KnowledgeStore", "LLMBackend", "Reasoning", "Usage", "WebSource"]
