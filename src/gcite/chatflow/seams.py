"""The chatflow's seams, as :class:`typing.Protocol` classes (design.md "Protocols").

* :class:`KnowledgeStore` (defined in :mod:`gcite.knowledge.protocol`): the knowledge
  retrieval branch; synchronous, lifecycle ``close()``.
* :class:`WebSource` (defined here; re-exported by :mod:`gcite.web`): the web search
  branch; async, lifecycle ``aclose()``.
* :class:`LLMBackend` (defined in :mod:`gcite.generate.backends`): the LLM node; async
  stream of text deltas, lifecycle ``warm_up()`` / ``aclose()``.
* :class:`Scheduler` (defined here; implemented by :class:`gcite.chatflow.scheduler.Scheduler`,
  one per process): how a run shares the process with the others - its turns for CPU
  steps, the pacing of its answer, the threads of its search and verification.

Every implementation passes its seam's contract suite (:mod:`gcite.testing.store_contract`,
:mod:`gcite.testing.web_contract`, :mod:`gcite.testing.llm_contract`). Importing this
module loads no HTTP client, no SQL and no vector database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

from gcite.generate.backends import LLMBackend, Reasoning, Usage
from gcite.knowledge.protocol import KnowledgeStore

T = TypeVar("T")


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


class RunTurn(Protocol):
    """One run's place in the process's schedule, from its start to its model call."""

    async def wait(self, work: Awaitable[T], *, computing: asyncio.Future[Any] | None = None) -> T:
        """Await ``work`` (sources, a condense call) holding no CPU slot, then take one for
        the run's next CPU step; counted as preparing meanwhile only while ``computing``
        (a future: work on this process's CPU) runs."""
        ...

    def done(self) -> None:
        """The run's preparation is over (its model is called, or it ended). Idempotent."""
        ...


@runtime_checkable
class Scheduler(Protocol):
    """How runs share a process: first text first (:mod:`gcite.chatflow.scheduler`)."""

    def turn(self, arrival: int | None = None) -> RunTurn:
        """A run starting now; ``arrival``: its request's number (None: now)."""
        ...

    def paced(self, backend: LLMBackend) -> LLMBackend:
        """``backend`` with its answers paced and coalesced for this process."""
        ...

    async def search(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` (blocking: a knowledge-base search) on the search threads."""
        ...

    async def verify(self, fn: Callable[..., T], *args: Any) -> T | None:
        """``fn(*args)`` on the verification threads; None past its time limit."""
        ...


__all__ = [
    "KnowledgeStore",
    "LLMBackend",
    "Reasoning",
    "RunTurn",
    "Scheduler",
    "Usage",
    "WebSource",
]
