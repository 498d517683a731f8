"""The start-up warm-up of a service process, begun once ``/ready`` has answered.

What the first answer and the first ``POST /retrieval`` would load (the verifier's module
and tables, the embedding model, the tokeniser dictionaries, the model SDK; see
:meth:`gcite.service.resources.Resources.warm_up` and
:func:`gcite.service.retrieval.warm_up`) is loaded in worker threads. They begin at the
first of: the first ``GET /ready`` answer has been sent (:meth:`WarmUp.after_ready`), a
chat request (:meth:`WarmUp.wait`), or :data:`BEGIN_AFTER_S` seconds after the server
listens (:meth:`WarmUp.begin_later`: ``gcite.service.server`` calls it once listening; a
process that nothing asks for ``/ready`` still warms up before its first question) -
not while the app starts nor while the first ``/ready`` is being answered: a warm-up
running beside them would take their CPU (and the GIL) and hold up ``/ready``.
:func:`gcite.testing.live_service` begins it at once (:meth:`WarmUp.start_threadsafe`).
A chat request that comes before the warm-up has ended waits for it: an answer needs
what it loads, and nothing is loaded twice.

The app's lifespan makes one :class:`WarmUp` (lifespan state ``warming``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("gcite.service")

BEGIN_AFTER_S = 0.5
"""Seconds after the server listens when the warm-up begins if neither a ``/ready`` answer
nor a chat request began it earlier."""


class WarmUp:
    """``work`` (blocking: awaited by the answers) in a worker thread and ``background``
    (blocking, best effort: nothing waits for it) in a daemon thread, both begun by the
    first :meth:`start` (or :meth:`wait`, :meth:`after_ready`, :meth:`begin_later`). Make it
    on the event loop it serves; ``begin_after_s``: :meth:`begin_later`'s delay."""

    def __init__(
        self,
        work: Callable[[], None],
        background: Callable[[], object] | None = None,
        *,
        begin_after_s: float = BEGIN_AFTER_S,
    ) -> None:
        self._work = work
        self._background = background
        self._begin_after_s = begin_after_s
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] | None = None
        self._later: asyncio.TimerHandle | None = None

    def start(self) -> asyncio.Task[None]:
        """Begin the warm-up (once; on the event loop); its task."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
            if self._background is not None:
                threading.Thread(
                    target=self._background, name="gcite-retrieval-warm-up", daemon=True
                ).start()
        return self._task

    def begin_later(self) -> None:
        """Begin the warm-up ``begin_after_s`` seconds from now unless something began it
        before (the server listens; on the event loop)."""
        if self._task is None and self._later is None:
            self._later = self._loop.call_later(self._begin_after_s, self.start)

    async def after_ready(self) -> None:
        """Begin the warm-up (``GET /ready``'s answer has been sent: its background task)."""
        self.start()

    @property
    def begun(self) -> bool:
        """Whether the warm-up has begun."""
        return self._task is not None

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
        """Wait for a warm-up that began, and begin none any more (the app's shutdown: it
        uses what is released)."""
        if self._later is not None:
            self._later.cancel()
        if self._task is not None:
            await asyncio.wait([self._task])

    async def _run(self) -> None:
        try:
            await asyncio.to_thread(self._work)
        except Exception:  # the first request then loads, or fails on, the same itself
            log.exception("start-up warm-up failed")


def listening(state: Mapping[str, Any] | None) -> None:
    """The server of an app with lifespan state ``state`` listens: its warm-up begins
    :data:`BEGIN_AFTER_S` seconds later unless ``/ready`` or a question begins it first
    (call on the event loop; nothing when the state has none)."""
    warming = (state or {}).get("warming")
    if isinstance(warming, WarmUp):
        warming.begin_later()


__all__ = ["BEGIN_AFTER_S", "WarmUp", "listening"]
