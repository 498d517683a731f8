"""The start-up warm-up of a service process, begun once the server listens.

What the first answer and the first ``POST /retrieval`` would load (the verifier's tables,
the embedding model, the tokeniser dictionaries, the model SDK; see
:meth:`gcite.service.resources.Resources.warm_up` and
:func:`gcite.service.retrieval.warm_up`) is loaded in worker threads. They start when the
server listens (:meth:`WarmUp.start`: ``gcite.service.server`` calls it after its
start-up, :func:`gcite.testing.live_service` too), not while the app starts: a warm-up
running beside the start-up would take its CPU and hold up ``/ready``. A chat request
that comes before the warm-up has ended waits for it (:meth:`WarmUp.wait`, which also
starts it when the app runs on a server that never called :meth:`WarmUp.start`): an
answer needs what it loads, and nothing is loaded twice.

The app's lifespan makes one :class:`WarmUp` (lifespan state ``warming``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("gcite.service")


class WarmUp:
    """``work`` (blocking: awaited by the answers) in a worker thread and ``background``
    (blocking, best effort: nothing waits for it) in a daemon thread, both begun by the
    first :meth:`start` (or :meth:`wait`). Make it on the event loop it serves."""

    def __init__(
        self, work: Callable[[], None], background: Callable[[], object] | None = None
    ) -> None:
        self._work = work
        self._background = background
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        """Begin the warm-up (once; on the event loop); its task."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
            if self._background is not None:
                threading.Thread(
                    target=self._background, name="gcite-retrieval-warm-up", daemon=True
                ).start()
        return self._task

    def start_threadsafe(self) -> None:
        """:meth:`start` from another thread."""
        self._loop.call_soon_threadsafe(self.start)

    @property
    def done(self) -> bool:
        """Whether the warm-up has ended (it never began: False)."""
        return self._task is not None and self._task.done()

    async def wait(self) -> None:
        """Until the warm-up has ended (beginning it if nothing did)."""
        task = self.start()
        if not task.done():
            await asyncio.wait([task])

    async def close(self) -> None:
        """Wait for a warm-up that began (the app's shutdown: it uses what is released)."""
        if self._task is not None:
            await asyncio.wait([self._task])

    async def _run(self) -> None:
        try:
            await asyncio.to_thread(self._work)
        except Exception:  # the first request then loads, or fails on, the same itself
            log.exception("start-up warm-up failed")


def listening(state: Mapping[str, Any] | None) -> None:
    """The server of an app with lifespan state ``state`` listens: begin its warm-up (call
    on the event loop; nothing when the state has none)."""
    warming = (state or {}).get("warming")
    if isinstance(warming, WarmUp):
        warming.start()


__all__ = ["WarmUp", "listening"]
