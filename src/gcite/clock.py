"""The clock deadlines and pacing waits are measured on, injected so tests move it.

A :class:`Clock` gives seconds on a monotonic scale and a sleep on that scale;
:class:`MonotonicClock` is the real one. Objects that wait take one (the scheduler,
:class:`gcite.generate.limits.LimitedBackend`), so their tests move a
:class:`gcite.testing.clock.ManualClock` by hand instead of depending on the machine's
speed.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Seconds on a monotonic scale, and a sleep on the same scale."""

    def now(self) -> float:
        """The time now, seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed (at once for ``<= 0``)."""
        ...


class MonotonicClock:
    """The real clock: :func:`time.monotonic` and :func:`asyncio.sleep` (the event loop's
    own clock, the same scale)."""

    def now(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep(seconds)``."""
        await asyncio.sleep(max(0.0, seconds))


__all__ = ["Clock", "MonotonicClock"]
