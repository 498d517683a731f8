"""Fewer, longer answer deltas when a process streams many answers at once.

A model streams one token per chunk (20-50 per second per answer). Every delta the LLM node
yields costs the same whatever its length: the citation stream parser, the run's events,
the SSE frame and a socket write. With a few answers in flight each delta goes on at once;
with many, a process spends most of its CPU on that per-delta work and every stream,
including the ones still waiting for their first text, slows down.

:func:`coalesced` reads the model's stream in a task of its own and hands on what arrived
since the last delta, joined, at most every :func:`flush_interval` seconds. The interval
is 0 (every delta at once, as before) while at most ``QUIET_STREAMS`` answers stream in the
process, then grows with their number (``PER_STREAM_S`` each, at most ``MAX_INTERVAL_S``):
from 50 answers in one process on, each is flushed every 100 ms, i.e. about five 20 ms
tokens per delta. The first delta of an answer always goes on at once (time to first text).
Reasoning pieces are joined with reasoning, answer text with answer text, in order;
anything else (the offline fallback's notice) passes on its own.

Aim: less work per stream in the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from gcite.generate.backends import Reasoning, aclose_stream

#: Answers streaming in one process up to which every delta goes on at once.
QUIET_STREAMS = 8
#: Seconds of flush interval per answer streaming in the process, past QUIET_STREAMS.
PER_STREAM_S = 0.002
#: The longest flush interval, seconds.
MAX_INTERVAL_S = 0.1

T = TypeVar("T")

_active = 0


def active_streams() -> int:
    """Answers being streamed through :func:`coalesced` in this process now."""
    return _active


def flush_interval(active: int) -> float:
    """Seconds between two deltas of one answer when ``active`` answers stream."""
    if active <= QUIET_STREAMS:
        return 0.0
    return min(MAX_INTERVAL_S, active * PER_STREAM_S)


def join(items: list[Any]) -> list[Any]:
    """``items`` with neighbouring answer texts (``str``) and neighbouring
    :class:`Reasoning` pieces joined; order kept, anything else left alone."""
    out: list[Any] = []
    for item in items:
        if out:
            last = out[-1]
            if isinstance(item, str) and isinstance(last, str):
                out[-1] = last + item
                continue
            if isinstance(item, Reasoning) and isinstance(last, Reasoning):
                out[-1] = Reasoning(last.text + item.text)
                continue
        out.append(item)
    return out


async def coalesced(source: AsyncIterator[T]) -> AsyncIterator[T]:
    """``source``'s items, joined (:func:`join`) into at most one delta per flush interval.

    ``source`` is read in a task of its own and closed when this generator is closed or
    cancelled (that closes the model call). An exception of ``source`` is raised after
    the items that came before it.
    """
    global _active
    loop = asyncio.get_running_loop()
    pending: list[T] = []
    ready = asyncio.Event()
    ended = False
    failure: BaseException | None = None

    async def pump() -> None:
        nonlocal ended, failure
        try:
            async for item in source:
                pending.append(item)
                ready.set()
        except Exception as exc:  # handed to the consumer, in order
            failure = exc
        finally:
            ended = True
            ready.set()

    reader = asyncio.create_task(pump())
    _active += 1
    try:
        last = None
        while True:
            await ready.wait()
            ready.clear()
            if last is not None and not ended:
                delay = last + flush_interval(_active) - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            items, pending[:] = pending[:], []
            for item in join(items):
                yield item
            if items:
                last = loop.time()
            if ended and not pending:
                if failure is not None:
                    raise failure
                return
    finally:
        _active -= 1
        if not reader.done():
            reader.cancel()
            await asyncio.wait([reader])  # a cancellation of this task still propagates
        await aclose_stream(source)


__all__ = [
    "MAX_INTERVAL_S",
    "PER_STREAM_S",
    "QUIET_STREAMS",
    "active_streams",
    "coalesced",
    "flush_interval",
    "join",
]
