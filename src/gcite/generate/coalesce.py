"""Fewer, longer answer deltas when a process streams many answers at once: the pure part.

A model streams one token per chunk (20-50 per second per answer). Every delta the LLM node
yields costs the same whatever its length: the citation stream parser, the run's events,
the SSE frame and a socket write. With a few answers in flight each delta goes on at once;
with many, a process spends most of its CPU on that per-delta work and every stream,
including the ones still waiting for their first text, slows down. The process's
:class:`gcite.chatflow.scheduler.Scheduler` hands on what arrived since an answer's last
delta, joined (:func:`join`), at most every :func:`flush_interval` seconds.
"""

from __future__ import annotations

from typing import Any

from gcite.generate.backends import Reasoning


def flush_interval(active: int, *, quiet: int, per_stream_s: float, max_interval_s: float) -> float:
    """Seconds between two deltas of one answer when ``active`` answers stream: 0 up to
    ``quiet`` answers, else ``active * per_stream_s``, at most ``max_interval_s``."""
    if active <= quiet:
        return 0.0
    return min(max_interval_s, active * per_stream_s)


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


__all__ = ["flush_interval", "join"]
