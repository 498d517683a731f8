"""A clock the test moves by hand (:class:`gcite.chatflow.scheduler.Clock`), and a wait
for a condition that only guards against a hang (it never measures speed)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable


class ManualClock:
    """Time stands still until :meth:`advance`; :meth:`sleep` returns once the clock has
    been advanced past its deadline."""

    def __init__(self, start: float = 1000.0) -> None:
        self.time = start
        self._ties = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.time + seconds, next(self._ties), wake))
        await wake

    def sleepers(self) -> int:
        """Sleeps not over yet."""
        return sum(1 for _, _, wake in self._sleepers if not wake.done())

    def advance(self, seconds: float) -> None:
        """Move the clock on and wake every sleep whose deadline has come."""
        self.time += seconds
        while self._sleepers and self._sleepers[0][0] <= self.time:
            _, _, wake = heapq.heappop(self._sleepers)
            if not wake.done():
                wake.set_result(None)


async def until(condition: Callable[[], bool], guard_s: float = 120.0) -> None:
    """Return as soon as ``condition()`` holds; fail after ``guard_s`` seconds (a hang
    guard, far beyond what any machine needs)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + guard_s
    while not condition():
        assert loop.time() < deadline, "condition not reached (hang guard)"
        await asyncio.sleep(0.005)
