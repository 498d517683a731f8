"""Fall back to the offline extractive answerer when the model is down (opt-in).

With ``on_model_error = "extractive"``, :class:`FallbackBackend` streams from the model;
when the model call fails *before any answer text* (connection refused, HTTP 5xx, a
refused key, a deadline), it answers from the retrieved chunks with
:class:`~gcite.generate.extractive.ExtractiveBackend` instead, and first yields a
:class:`FellBack` notice so the run can mark the answer's metadata
(``message_end.metadata.gcite.fallback``). A failure after answer text has been sent is
not hidden: it ends the run as usual (a half answer from one source and half from
another would be worse).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gcite.errors import LLMError

if TYPE_CHECKING:
    from gcite.generate.backends import LLMBackend, Usage

log = logging.getLogger("gcite.generate")


@dataclass(frozen=True)
class FellBack:
    """Yielded once by :class:`FallbackBackend` when the offline answerer takes over."""

    backend: str
    reason: str

    def __bool__(self) -> bool:
        return True


class FallbackBackend:
    """``primary``, or ``fallback`` when ``primary`` fails before any answer text."""

    def __init__(self, primary: LLMBackend, fallback: LLMBackend) -> None:
        self.primary = primary
        self.fallback = fallback
        self.name = primary.name

    def warm_up(self) -> None:
        """Warm both backends."""
        self.primary.warm_up()
        self.fallback.warm_up()

    async def aclose(self) -> None:
        """Close both backends."""
        await self.primary.aclose()
        await self.fallback.aclose()

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]] = (),
        query: str = "",
        usage: Usage | None = None,
    ) -> AsyncIterator[Any]:
        """The primary's deltas (``str`` | ``Reasoning``), or a :class:`FellBack` notice
        and the fallback's."""
        answered = False
        try:
            async for delta in self.primary.stream(
                messages, chunks=chunks, query=query, usage=usage
            ):
                if isinstance(delta, str) and delta:
                    answered = True
                yield delta
            return
        except LLMError as exc:
            if answered:
                raise
            reason = str(exc)
        log.warning("model failed before answering, using %s: %s", self.fallback.name, reason)
        yield FellBack(self.fallback.name, reason)
        async for delta in self.fallback.stream(messages, chunks=chunks, query=query, usage=usage):
            yield delta


__all__ = ["FallbackBackend", "FellBack"]
