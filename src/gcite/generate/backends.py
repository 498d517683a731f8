"""The LLM node's backend seam: the :class:`LLMBackend` protocol and what backends share.

A backend turns chat ``messages`` (from :func:`gcite.generate.prompt.build_messages`)
into a stream of text deltas that carry ``[C:N]`` markers (seed §5: the LLM node in
streaming mode). Two implementations:

- :class:`gcite.generate.openai_backend.OpenAIBackend`: any OpenAI-compatible
  chat-completions endpoint (DeepSeek, Qwen, Ollama, vLLM, ...), streaming;
- :class:`gcite.generate.extractive.ExtractiveBackend`: offline, deterministic, picks
  the chunk sentences that best answer the question (default when no LLM is set).

Backends raise :class:`gcite.errors.LLMError` and nothing else (cancellation apart);
:func:`gcite.generate.factory.make_backend` builds the configured one.
Every backend passes :mod:`gcite.testing.llm_contract`. Lifecycle: :meth:`LLMBackend.warm_up`
(load what the first answer would, off the event loop) and :meth:`LLMBackend.aclose`
(release connections); :class:`BackendLifecycle` gives both as no-ops.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass
class Usage:
    """Token usage of one generation, filled in by the backend while it streams.

    ``prompt_tokens`` / ``completion_tokens``: as reported by the provider, or estimated
    (characters / 2 for the prompt, deltas for the completion) when it reports nothing;
    ``estimated`` says which.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = True

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Reasoning:
    """A piece of the model's reasoning, yielded by :meth:`LLMBackend.stream` between answer
    deltas by backends whose model reasons aloud; never part of the answer."""

    text: str


#: Key set to True on a chunk the chatflow gives a backend with a ``weak_margin``
#: attribute when the chunk is a knowledge-base chunk scored below the retrieval's
#: ``score_threshold`` (the backend asked to see chunks down to ``threshold - margin``).
WEAK_KEY = "below_threshold"


@runtime_checkable
class LLMBackend(Protocol):
    """What the chatflow's LLM node needs from a language model.

    ``name``: reported in ``message_end.metadata.gcite.backend``.
    ``stream(messages, *, chunks, query, usage=None)``: an async iterator of text
    deltas (``str``), markers included, and optionally :class:`Reasoning` pieces.
    ``chunks`` are the merge node's UnifiedChunk list (for backends that work on chunks
    directly), ``query`` the user question; ``usage``, when given, is filled in as tokens
    are known. Closing the iterator (``aclose`` / task cancellation) must close the
    upstream call. Raises ``LLMError``.
    """

    name: str

    def warm_up(self) -> None:
        """Load what the first answer would otherwise load (blocking; call off the loop)."""
        ...

    async def aclose(self) -> None:
        """Release connections. Safe to call twice."""
        ...

    def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]],
        query: str,
        usage: Usage | None = None,
    ) -> AsyncIterator[str | Reasoning]:
        """Stream the answer as text deltas."""
        ...


class BackendLifecycle:
    """No-op :meth:`LLMBackend.warm_up` and :meth:`LLMBackend.aclose` for backends to inherit."""

    def warm_up(self) -> None:
        """Nothing to load."""

    async def aclose(self) -> None:
        """Nothing to release."""


class WrappedBackend:
    """Base of a backend that wraps another one (per-answer limits, pacing): ``name``,
    :meth:`warm_up`, :meth:`aclose` and every other attribute are the inner backend's;
    a subclass gives :meth:`LLMBackend.stream`."""

    def __init__(self, inner: LLMBackend) -> None:
        self.inner = inner
        self.name = inner.name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def warm_up(self) -> None:
        """The inner backend's warm-up."""
        self.inner.warm_up()

    async def aclose(self) -> None:
        """Close the inner backend."""
        await self.inner.aclose()


def estimate_tokens(messages: Sequence[dict[str, str]]) -> int:
    """A rough prompt size in tokens (characters / 2; Chinese text is ~1-2 chars a token)."""
    return sum(len(m.get("content") or "") for m in messages) // 2


async def aclose_stream(stream: object) -> None:
    """Close ``stream`` when it can be closed (async generators have ``aclose``; a plain
    async iterator may not): a backend's stream closed this way closes its model call."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


__all__ = [
    "WEAK_KEY",
    "BackendLifecycle",
    "LLMBackend",
    "Reasoning",
    "Usage",
    "WrappedBackend",
    "aclose_stream",
    "estimate_tokens",
]
