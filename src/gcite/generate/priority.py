"""First text first: in a busy process, runs still preparing go before answers streaming.

In a burst every stream of a process makes progress at once: the CPU is shared between the
runs still preparing (request, history, retrieval, merge, prompt) and the answers already
streaming (one model-stream read, parse and SSE frame after another). Shared that way, the
median stream gets its first text only when most of the burst's work is done
(docs/scaling.md). Language-model servers schedule prefills before decode steps for
the same reason. Two rules:

* **Arrival order.** Each request takes a number when it arrives (:func:`arrival`). Its
  CPU steps before the model call - storing the message, the run up to the retrieval
  calls, and merge and prompt after them - each run in one of :data:`ADMIT` slots of the
  process (:func:`step`, :meth:`Preparing.admit`); a free slot goes to the earliest
  request waiting. The waits between the steps (the knowledge base, web search, a
  follow-up's condense call) hold no slot, so a slow source never holds back others.
* **Preparing before streaming.** A run counts as preparing from its start until its LLM
  node calls the model (:class:`Preparing`), the knowledge-base search included (CPU in
  a thread), but not while it waits for web search or a condense call only (it needs no
  CPU then: holding answers for it would only slow them down). :func:`paced`
  wraps the byte stream of a model call: after the answer's first text, each socket
  read first awaits :func:`hold`, which, while runs prepare and more than
  :data:`~gcite.generate.coalesce.QUIET_STREAMS` answers stream, waits until no run
  prepares, at most :data:`MAX_HOLD_S` after the stream's last read. What arrived
  meanwhile waits in the socket and is read at once afterwards: nothing
  is dropped or reordered, and the first text of an answer is never held.

With a few answers in flight nothing is held, and slots are only waited for when more
than :data:`ADMIT` requests of the process are in a CPU step at once. The aim: an early
first text (p50) in a burst of many streams.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TypeVar

from gcite.generate.backends import aclose_stream
from gcite.generate.coalesce import QUIET_STREAMS, active_streams

#: The longest a streaming answer's next read waits for preparing runs, seconds.
MAX_HOLD_S = 0.25
#: CPU steps of requests before their model call running at once in one process.
ADMIT = 4

T = TypeVar("T")

_arrivals = itertools.count()
_preparing = 0
_busy_slots = 0
_waiting: list[tuple[int, int, asyncio.Future[None]]] = []  # heap: (arrival, tie, turn)
_ties = itertools.count()
_clear: asyncio.Future[None] | None = None  # done when no run prepares
# true in the task of a run still preparing: its own model calls (a follow-up's condense
# call) are part of its preparation, never held
_in_preparation: ContextVar[bool] = ContextVar("gcite_in_preparation", default=False)


def arrival() -> int:
    """The next arrival number of this process (smaller: earlier)."""
    return next(_arrivals)


def preparing_runs() -> int:
    """Runs of this process between their start and their model call now."""
    return _preparing


def busy_slots() -> int:
    """Slots taken now (at most :data:`ADMIT`)."""
    return _busy_slots


def waiting_steps() -> int:
    """CPU steps waiting for a slot now."""
    return sum(1 for _, _, turn in _waiting if not turn.done())


async def _take(number: int) -> None:
    global _busy_slots
    if _busy_slots < ADMIT and not any(not turn.done() for _, _, turn in _waiting):
        _busy_slots += 1
        return
    turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    heapq.heappush(_waiting, (number, next(_ties), turn))
    try:
        await turn
    except asyncio.CancelledError:
        if turn.done() and not turn.cancelled():  # the slot came with the cancellation
            _give()
        raise


def _give() -> None:
    """Hand a slot that is being freed to the earliest waiter, or free it."""
    global _busy_slots
    while _waiting:
        _, _, turn = heapq.heappop(_waiting)
        if not turn.done() and not turn.get_loop().is_closed():
            turn.set_result(None)  # the slot passes on
            return
    _busy_slots -= 1


@asynccontextmanager
async def step(number: int) -> AsyncIterator[None]:
    """Hold one of the process's :data:`ADMIT` slots inside this block; waiters get free
    slots in the order of their arrival ``number``."""
    await _take(number)
    try:
        yield
    finally:
        _give()


class Preparing:
    """Counts one run as preparing from its creation until :meth:`done` (idempotent), but
    not between :meth:`away` and the next :meth:`admit`, and holds its slot between
    :meth:`admit` and :meth:`release`.

    ``number``: the request's :func:`arrival` number (a new one when None).
    """

    __slots__ = ("_counted", "_open", "_slot", "number")

    def __init__(self, number: int | None = None) -> None:
        global _preparing
        _preparing += 1
        self._counted = True
        self._open = True
        self._slot = False
        self.number = arrival() if number is None else number
        _in_preparation.set(True)

    async def admit(self) -> None:
        """Count the run again (after :meth:`away`) and take a slot (in arrival order) for
        its next CPU step; no-op when held or after :meth:`done`."""
        global _preparing
        if not self._open:
            return
        if not self._counted:
            self._counted = True
            _preparing += 1
        if not self._slot:
            await _take(self.number)
            self._slot = True

    def release(self) -> None:
        """Free the run's slot (before a wait for a source); no-op when not held."""
        if self._slot:
            self._slot = False
            _give()

    def away(self) -> None:
        """Free the slot and stop counting the run until :meth:`admit`: it waits for a
        network source (web search, a condense call) and needs no CPU meanwhile, so
        answers streaming are not held for it."""
        global _preparing, _clear
        self.release()
        if not self._counted:
            return
        self._counted = False
        _preparing -= 1
        if _preparing == 0 and _clear is not None:
            clear, _clear = _clear, None
            if not clear.done() and not clear.get_loop().is_closed():
                clear.get_loop().call_soon_threadsafe(_resolve, clear)

    def done(self) -> None:
        """Stop counting the run and free its slot: its model is called, or it ended."""
        self._open = False
        _in_preparation.set(False)
        self.away()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def busy() -> bool:
    """True when streaming answers should let preparing runs go first."""
    return _preparing > 0 and active_streams() > QUIET_STREAMS


async def hold(since: float) -> None:
    """Wait while :func:`busy`, until no run prepares or ``since + MAX_HOLD_S`` (loop
    time, seconds) has passed. Returns at once when not busy."""
    global _clear
    if not busy():
        return
    loop = asyncio.get_running_loop()
    remaining = since + MAX_HOLD_S - loop.time()
    if remaining <= 0:
        return
    clear = _clear
    if clear is None or clear.done() or clear.get_loop() is not loop:
        clear = _clear = loop.create_future()
    await asyncio.wait({clear}, timeout=remaining)


async def paced(chunks: AsyncIterator[T], answering: list[bool]) -> AsyncIterator[T]:
    """``chunks``, each read after :func:`hold` once ``answering[0]`` is true (the stream
    has yielded text), unless opened by a run still preparing (a condense call): then
    never held. Closing this generator closes ``chunks``."""
    if _in_preparation.get():
        answering = [False]  # never marked: the preparation's own call is not held
    loop = asyncio.get_running_loop()
    source = chunks.__aiter__()
    last = loop.time()
    try:
        while True:
            if answering[0]:
                await hold(last)
                last = loop.time()
            try:
                chunk = await source.__anext__()
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        await aclose_stream(source)


__all__ = [
    "ADMIT",
    "MAX_HOLD_S",
    "Preparing",
    "arrival",
    "busy",
    "busy_slots",
    "hold",
    "paced",
    "preparing_runs",
    "step",
    "waiting_steps",
]
