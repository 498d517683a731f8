"""Limits on one model call: a total deadline, a no-text deadline and size caps.

A model server that sends keep-alive comments or empty deltas forever, or one huge line,
must not hold a run (or the process's memory) without bound. Two pieces:

* :class:`LimitedBackend` wraps any :class:`~gcite.generate.backends.LLMBackend`: the
  answer must be complete within ``total_s`` seconds, new answer text must arrive at
  least every ``idle_s`` seconds (keep-alive comments and empty deltas do not count: the
  backend never yields them), and the answer may not exceed ``max_chars`` characters.
  Breaking a limit closes the model call and raises :class:`~gcite.errors.LLMError`, so
  the run ends like any model failure: Dify's ``error`` event and a stored ``failed``
  status. The deadlines are measured on an injected :class:`gcite.clock.Clock` (the
  real one unless given).
* :func:`capped_lines` splits a byte stream into text lines and raises
  :class:`LLMError` as soon as one line exceeds ``max_bytes`` (before it is held in
  memory), for the OpenAI backend's SSE reader.

Settings: ``llm_total_timeout_s``, ``llm_idle_timeout_s``, ``max_answer_chars``,
``max_stream_line_bytes``. Inside :class:`Limits` 0 means no limit; the settings reach
it only through ``llm_total_timeout_s = "none"`` (:mod:`gcite.config_checks` refuses
0 or less at start).

Source: issue 16 items 4 and 7.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from gcite.clock import Clock, MonotonicClock
from gcite.errors import LLMError
from gcite.generate.backends import WrappedBackend, aclose_stream

if TYPE_CHECKING:
    from gcite.config import Settings
    from gcite.generate.backends import LLMBackend, Reasoning, Usage

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """Deadlines in seconds and caps (characters, bytes); ``<= 0`` means no limit."""

    total_s: float = 300.0
    idle_s: float = 60.0
    max_chars: int = 20000
    max_line_bytes: int = 1_000_000

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """The limits configured in ``settings``."""
        return cls(
            total_s=settings.llm.total_timeout_s,
            idle_s=settings.llm.idle_timeout_s,
            max_chars=settings.llm.max_answer_chars,
            max_line_bytes=settings.llm.max_stream_line_bytes,
        )


class LimitedBackend(WrappedBackend):
    """An :class:`LLMBackend` that enforces :class:`Limits` on another one.

    ``name``, :meth:`warm_up`, :meth:`aclose` and every other attribute are the inner
    backend's (:class:`~gcite.generate.backends.WrappedBackend`).
    :class:`~gcite.generate.backends.Reasoning` pieces pass through: they restart the
    no-text deadline (the model is working) but do not count towards the answer size;
    the total deadline bounds them.
    """

    def __init__(self, inner: LLMBackend, limits: Limits, clock: Clock | None = None) -> None:
        super().__init__(inner)
        self.limits = limits
        self.clock: Clock = clock or MonotonicClock()  # the deadlines are measured on it

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]] = (),
        query: str = "",
        usage: Usage | None = None,
    ) -> AsyncIterator[str | Reasoning]:
        """The inner stream within the limits; raises :class:`LLMError` past one."""
        limits = self.limits
        total_end = self.clock.now() + limits.total_s if limits.total_s > 0 else None
        deadlines = _Deadlines(self.clock, total_end, limits.idle_s)
        produced = 0
        inner = self.inner.stream(messages, chunks=chunks, query=query, usage=usage)
        try:
            while True:
                try:
                    delta = await deadlines.next(inner)
                except StopAsyncIteration:
                    return
                except TimeoutError as exc:
                    if total_end is not None and self.clock.now() >= total_end - 1e-3:
                        raise LLMError(f"模型回答超过总时限 {limits.total_s:g} 秒，已中止") from exc
                    raise LLMError(
                        f"模型服务 {limits.idle_s:g} 秒内没有返回新的回答文字，已中止"
                    ) from exc
                if not delta:
                    continue  # the idle deadline restarts only on text
                if not isinstance(delta, str):
                    yield delta  # reasoning
                    continue
                produced += len(delta)
                if limits.max_chars > 0 and produced > limits.max_chars:
                    raise LLMError(f"模型回答超过长度上限 {limits.max_chars} 字，已中止")
                yield delta
        finally:
            deadlines.close()
            await aclose_stream(inner)


class _Deadlines:
    """The deadlines of one limited stream's reads, kept by one watchdog task.

    Each read (:meth:`next`) must end by ``min(total_end, its start + idle_s)`` on the
    clock. A read costs no task and no timer of its own: the watchdog (started by the
    first read, stopped by :meth:`close`) sleeps until the current read's deadline and,
    when the read is still pending then, cancels the reading task, which :meth:`next`
    turns into :class:`TimeoutError` (a cancellation from elsewhere, a stop, still
    propagates: :meth:`asyncio.Task.uncancel` tells them apart, as ``asyncio.timeout``
    does). ``total_end``: clock seconds or None; ``idle_s <= 0``: no per-read deadline.
    """

    def __init__(self, clock: Clock, total_end: float | None, idle_s: float) -> None:
        self.clock = clock
        self.total_end = total_end
        self.idle_s = idle_s
        self.deadline = math.inf  # of the read pending, else of the last one
        self._reader: asyncio.Task[Any] | None = None  # the task of the read pending
        self._fired = False
        self._watchdog: asyncio.Task[None] | None = None

    def _deadline(self, start: float) -> float:
        idle_end = start + self.idle_s if self.idle_s > 0 else math.inf
        return min(idle_end, math.inf if self.total_end is None else self.total_end)

    async def next(self, inner: AsyncIterator[T]) -> T:
        """The next item of ``inner``; raises :class:`TimeoutError` (the pending read
        cancelled) when its deadline passes first."""
        now = self.clock.now()
        self.deadline = self._deadline(now)
        if self.deadline == math.inf:
            return await anext(inner)
        if self.deadline <= now:
            raise TimeoutError
        reader = asyncio.current_task()
        assert reader is not None
        if self._watchdog is None:
            self._watchdog = asyncio.ensure_future(self._watch())
        self._reader = reader
        try:
            item = await anext(inner)
        except BaseException as exc:
            if not self._fired:
                raise
            self._timed_out(reader, exc)
        finally:
            self._reader = None
        if self._fired:  # the inner stream took the cancellation and went on
            self._timed_out(reader, None)
        return item

    @staticmethod
    def _timed_out(reader: asyncio.Task[Any], cause: BaseException | None) -> NoReturn:
        """End a read the watchdog cancelled, whatever the inner stream made of the
        cancellation (re-raised it, ended, raised something else, or yielded anyway):
        take back the watchdog's cancellation once; a stop pending as well still
        propagates as :class:`asyncio.CancelledError`, else :class:`TimeoutError`."""
        if reader.uncancel() > 0:  # a stop came too
            raise asyncio.CancelledError from cause
        raise TimeoutError from cause

    async def _watch(self) -> None:
        clock = self.clock
        while True:
            now = clock.now()
            if self.deadline > now:
                await clock.sleep(self.deadline - now)
            elif self._reader is not None:  # the read pending is past its deadline
                self._fired = True
                self._reader.cancel()
                return
            elif self.total_end is not None and self.total_end <= now:
                return  # the next read fails at once (next())
            else:  # between reads: the next one ends no earlier than this
                await clock.sleep(self._deadline(now) - now)

    def close(self) -> None:
        """Stop the watchdog (the stream has ended). Safe to call twice."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None


def limited(backend: LLMBackend, settings: Settings) -> LimitedBackend:
    """``backend`` with the limits of ``settings``."""
    return LimitedBackend(backend, Limits.from_settings(settings))


async def capped_lines(chunks: AsyncIterator[bytes], max_bytes: int) -> AsyncIterator[str]:
    """Text lines (UTF-8, without their ``\\n`` / ``\\r\\n`` / ``\\r`` ending) of a byte
    stream; raises :class:`LLMError` when a line grows past ``max_bytes`` (``<= 0``: no
    cap), without buffering more than ``max_bytes`` plus one chunk."""
    buffer = bytearray()
    async for chunk in chunks:
        buffer += chunk
        while True:
            cut = _line_end(buffer)
            if cut is None:
                break
            end, skip = cut
            if 0 < max_bytes < end:
                raise LLMError(f"模型服务返回的一行数据超过上限 {max_bytes} 字节，已中止")
            line = bytes(buffer[:end])
            del buffer[: end + skip]
            yield line.decode("utf-8", errors="replace")
        if 0 < max_bytes < len(buffer):
            raise LLMError(f"模型服务返回的一行数据超过上限 {max_bytes} 字节，已中止")
    if buffer:
        if 0 < max_bytes < len(buffer):
            raise LLMError(f"模型服务返回的一行数据超过上限 {max_bytes} 字节，已中止")
        yield bytes(buffer).rstrip(b"\r").decode("utf-8", errors="replace")


def _line_end(buffer: bytearray) -> tuple[int, int] | None:
    """``(index, length)`` of the first line ending in ``buffer`` (a trailing ``\\r`` waits
    for the next chunk: it may be the first half of ``\\r\\n``)."""
    lf = buffer.find(b"\n")
    cr = buffer.find(b"\r")
    if cr != -1 and (lf == -1 or cr < lf):
        if cr + 1 == len(buffer):
            return None
        return cr, 2 if buffer[cr + 1 : cr + 2] == b"\n" else 1
    if lf != -1:
        return lf, 1
    return None


__all__ = ["LimitedBackend", "Limits", "capped_lines", "limited"]
