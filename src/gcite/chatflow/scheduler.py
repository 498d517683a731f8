"""First text first: the one object that orders a process's runs and paces its answers.

In a burst every stream of a process makes progress at once: the CPU is shared between the
runs still preparing (request, history, retrieval, merge, prompt) and the answers already
streaming (one model-stream read, parse and SSE frame after another). Shared that way, the
median stream gets its first text only when most of the burst's work is done.
Language-model servers schedule prefills before decode steps for the same reason. The
app lifespan creates one :class:`Scheduler` per process; the chatflow sees it through the
small :class:`~gcite.chatflow.seams.Scheduler` protocol. It owns:

* **Arrival order and slots.** Each request takes a number when it arrives
  (:meth:`Scheduler.arrival`). Its CPU steps before the model call - storing the message,
  the run up to the retrieval calls, merge and prompt after them - each run in one of
  ``admit`` slots (:meth:`Scheduler.step`, :meth:`Preparing.wait`); a free slot goes to the
  earliest request waiting. The waits between the steps (the knowledge base, web search,
  a follow-up's condense call) hold no slot, so a slow source never holds back others.
* **Preparing before streaming.** A run counts as preparing from its start
  (:meth:`Scheduler.turn`) until its LLM node calls the model (:meth:`Preparing.done`), the
  knowledge-base search included (CPU in a thread), but not while it waits for web search
  or a condense call only (it needs no CPU then). :class:`PacedBackend` wraps any backend:
  after an answer's first text, each next delta is pulled from the model's stream only
  when no run prepares, or ``max_hold_s`` after the stream's previous pull, while the
  process is busy (more than ``quiet_streams`` answers stream). After such a wait the
  stream reads freely for ``drain_s``: what the model sent meanwhile waited in the socket
  and is read at once. Nothing is dropped or reordered; the first text is never held, and
  a run's own condense call (not paced: it uses the backend unwrapped) neither.
* **Coalescing.** Up to ``quiet_streams`` answers in the process, every delta goes on at
  once, read in the task that consumes it (no hand-off between tasks per delta). Past
  that, the same wrapper reads the rest of the model's stream in a task of its own and
  hands on what arrived since its last delta, joined (:func:`gcite.generate.coalesce.join`),
  at most every :func:`~gcite.generate.coalesce.flush_interval` seconds, growing with the
  number of answers. The first delta of an answer always goes on at once.
* **Threads.** The knowledge-base searches (:meth:`Scheduler.search`) and the citation
  verifications (:meth:`Scheduler.verify`, at most ``verify_timeout_s`` each) run on pools
  of their own, so neither queues behind the other nor behind the event loop's default
  executor.

Every wait is measured on an injected :class:`Clock` (:class:`MonotonicClock` in the
service), so tests drive time by hand. The knobs are settings (:class:`Knobs`,
``sched_*`` in :class:`gcite.config.Settings`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import heapq
import itertools
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from gcite.clock import Clock, MonotonicClock
from gcite.config import from_section
from gcite.generate.backends import Reasoning, WrappedBackend, aclose_stream
from gcite.generate.coalesce import flush_interval, join

if TYPE_CHECKING:
    from gcite.config import Settings
    from gcite.generate.backends import LLMBackend, Usage

T = TypeVar("T")


@dataclass(frozen=True)
class Knobs:
    """The scheduler's settings (``sched_<name>`` in :class:`gcite.config.Settings`).

    ``admit``: CPU steps before their model call running at once (values below 1 count
    as 1); ``max_hold_s``: the longest a streaming answer's next pull waits for preparing
    runs; ``drain_s``: how long a stream reads freely after such a wait; ``quiet_streams``:
    answers streaming up to which nothing is held or joined; ``per_stream_s``: flush
    interval per streaming answer past ``quiet_streams``, at most ``max_interval_s``;
    ``search_threads``: knowledge-base searches at once (0: Python's default executor
    size, ``min(32, CPUs + 4)``); ``verify_threads``: verifications at once;
    ``verify_timeout_s``: how long a run waits for its verification (queueing included)
    before it ends without one. Seconds throughout.
    """

    admit: int = 4
    max_hold_s: float = 0.25
    drain_s: float = 0.01
    quiet_streams: int = 8
    per_stream_s: float = 0.002
    max_interval_s: float = 0.1
    search_threads: int = 0
    verify_threads: int = 4
    verify_timeout_s: float = 30.0

    @classmethod
    def from_settings(cls, settings: Settings) -> Knobs:
        """The knobs configured in ``settings`` (its ``[scheduling]`` section)."""
        return from_section(cls, settings.scheduling)


class Scheduler:
    """The process's arrival order, slots, holding, coalescing and thread pools (see the
    module docstring). One per event loop; :meth:`close` at shutdown."""

    def __init__(self, knobs: Knobs | None = None, clock: Clock | None = None) -> None:
        self.knobs = knobs or Knobs()
        self.clock: Clock = clock or MonotonicClock()
        self._arrivals = itertools.count()
        self._ties = itertools.count()
        self._preparing = 0
        self._busy_slots = 0
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []  # heap
        self._clear: asyncio.Future[None] | None = None  # done when no run prepares
        self._streams = 0
        self._held = 0
        self._searchers: ThreadPoolExecutor | None = None
        self._verifiers: ThreadPoolExecutor | None = None

    @classmethod
    def from_settings(cls, settings: Settings, clock: Clock | None = None) -> Scheduler:
        """A scheduler with the knobs of ``settings``."""
        return cls(Knobs.from_settings(settings), clock)

    # ------------------------------------------------------------------ counters
    def arrival(self) -> int:
        """The next arrival number (smaller: earlier)."""
        return next(self._arrivals)

    def preparing_runs(self) -> int:
        """Runs between their start and their model call now (not while they wait)."""
        return self._preparing

    def busy_slots(self) -> int:
        """Slots taken now (at most ``admit``)."""
        return self._busy_slots

    def waiting_steps(self) -> int:
        """CPU steps waiting for a slot now."""
        return sum(1 for _, _, turn in self._waiting if not turn.done())

    def active_streams(self) -> int:
        """Answers streaming through :meth:`answer` now."""
        return self._streams

    def held_streams(self) -> int:
        """Answers whose next pull waits for preparing runs now."""
        return self._held

    def busy(self) -> bool:
        """True when streaming answers let preparing runs go first."""
        return self._preparing > 0 and self._streams > self.knobs.quiet_streams

    # --------------------------------------------------------------------- slots
    async def _take(self, number: int) -> None:
        if self._busy_slots < max(1, self.knobs.admit) and not any(
            not turn.done() for _, _, turn in self._waiting
        ):
            self._busy_slots += 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (number, next(self._ties), turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # the slot came with the cancellation
                self._give()
            raise

    def _give(self) -> None:
        """Hand a slot being freed to the earliest waiter, or free it."""
        while self._waiting:
            _, _, turn = heapq.heappop(self._waiting)
            if not turn.done():
                turn.set_result(None)  # the slot passes on
                return
        self._busy_slots -= 1

    @asynccontextmanager
    async def step(self, number: int) -> AsyncIterator[None]:
        """Hold a slot inside this block; waiters get free slots in the order of their
        arrival ``number``."""
        await self._take(number)
        try:
            yield
        finally:
            self._give()

    def turn(self, arrival: int | None = None) -> Preparing:
        """A run starting now, counted as preparing until :meth:`Preparing.done`;
        ``arrival``: its request's number (a new one when None)."""
        return Preparing(self, self.arrival() if arrival is None else arrival)

    def _count(self) -> None:
        self._preparing += 1

    def _uncount(self) -> None:
        self._preparing -= 1
        if self._preparing == 0 and self._clear is not None:
            clear, self._clear = self._clear, None
            if not clear.done():
                clear.set_result(None)

    # ------------------------------------------------------------------- answers
    async def hold(self, since: float) -> bool:
        """Wait while :meth:`busy`, until no run prepares or ``since + max_hold_s`` (clock
        seconds). True when it waited (it returns at once when not busy or past that)."""
        if not self.busy():
            return False
        remaining = since + self.knobs.max_hold_s - self.clock.now()
        if remaining <= 0:
            return False
        clear = self._clear
        if clear is None or clear.done():
            clear = self._clear = asyncio.get_running_loop().create_future()
        self._held += 1
        try:
            await self._within(remaining, clear)
        finally:
            self._held -= 1
        return True

    async def _within(self, seconds: float, work: asyncio.Future[Any]) -> bool:
        """Wait until ``work`` is done or ``seconds`` have passed on the clock (``work``
        is left running); True when ``work`` is done."""
        timer = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        return work.done()

    def paced(self, backend: LLMBackend) -> PacedBackend:
        """``backend`` with its answers paced and coalesced by this scheduler."""
        return PacedBackend(backend, self)

    async def answer(self, source: AsyncIterator[T]) -> AsyncIterator[T]:
        """``source`` (a model's stream) paced and coalesced (module docstring).

        While the process is quiet (at most ``quiet_streams`` answers stream) nothing is
        held or joined, and ``source`` is read in the consumer's own task: each delta goes
        on in the pass of the event loop that read it. From the moment the process is
        busier, the rest of ``source`` is read in a task of its own (:meth:`_pump`) and
        handed on joined. ``source`` is closed when this generator is closed or cancelled
        (that closes the model call). An exception of ``source`` is raised after the items
        that came before it.
        """
        self._streams += 1
        reader: asyncio.Task[None] | None = None
        try:
            last: float | None = None
            answering = False
            while self._streams <= self.knobs.quiet_streams:
                try:
                    item = await anext(source)
                except StopAsyncIteration:
                    return
                yield item
                last = self.clock.now()
                answering = answering or _is_text(item)
            relay: _Relay[T] = _Relay()
            reader = asyncio.create_task(self._pump(source, relay, answering))
            while True:
                await relay.ready.wait()
                relay.ready.clear()
                if last is not None and not relay.ended:
                    await self._until_flush(last)
                items, relay.pending[:] = relay.pending[:], []
                for item in join(items):
                    yield item
                if items:
                    last = self.clock.now()
                if relay.ended and not relay.pending:
                    if relay.failure is not None:
                        raise relay.failure
                    return
        finally:
            self._streams -= 1
            if reader is not None and not reader.done():
                reader.cancel()
                await asyncio.wait([reader])  # a cancellation of this task still propagates
            await aclose_stream(source)

    async def _pump(self, source: AsyncIterator[T], relay: _Relay[T], answering: bool) -> None:
        """Read ``source`` into ``relay``; after the first text (``answering``: it has
        gone on already) each pull may be held (:meth:`hold`), then reads freely for
        ``drain_s``."""
        clock = self.clock
        last = clock.now()
        free_until = -math.inf
        try:
            while True:
                if answering and clock.now() >= free_until and await self.hold(last):
                    free_until = clock.now() + self.knobs.drain_s
                last = clock.now()
                try:
                    item = await anext(source)
                except StopAsyncIteration:
                    return
                relay.pending.append(item)
                relay.ready.set()
                answering = answering or _is_text(item)
        except Exception as exc:  # handed to the consumer, in order
            relay.failure = exc
        finally:
            relay.ended = True
            relay.ready.set()

    async def _until_flush(self, last: float) -> None:
        """Wait until the flush interval for the streams now has passed since ``last``."""
        interval = flush_interval(
            self._streams,
            quiet=self.knobs.quiet_streams,
            per_stream_s=self.knobs.per_stream_s,
            max_interval_s=self.knobs.max_interval_s,
        )
        delay = last + interval - self.clock.now()
        if delay > 0:
            await self.clock.sleep(delay)

    # ------------------------------------------------------------------- threads
    async def search(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the search threads (blocking work: a knowledge-base search)."""
        if self._searchers is None:
            workers = self.knobs.search_threads if self.knobs.search_threads > 0 else None
            self._searchers = ThreadPoolExecutor(workers, thread_name_prefix="gcite-search")
        return await _in_pool(self._searchers, fn, *args)

    async def verify(self, fn: Callable[..., T], *args: Any) -> T | None:
        """``fn(*args)`` on the verification threads, or None when it has not returned
        within ``verify_timeout_s`` (clock seconds, queueing included; it is left to
        finish on its own). Raises what ``fn`` raises."""
        if self._verifiers is None:
            workers = max(1, self.knobs.verify_threads)
            self._verifiers = ThreadPoolExecutor(workers, thread_name_prefix="gcite-verify")
        work = asyncio.ensure_future(_in_pool(self._verifiers, fn, *args))
        try:
            await self._within(self.knobs.verify_timeout_s, work)
        finally:
            late = not work.done()
            if late:  # past the limit, or this run was cancelled: stop waiting for it
                work.cancel()
        if late:
            return None
        return work.result()

    def close(self) -> None:
        """Stop the thread pools (running work finishes on its own). Safe to call twice."""
        for pool in (self._searchers, self._verifiers):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self._searchers = self._verifiers = None


class _Relay(Generic[T]):
    """What the reader task of one answer hands on to its consumer: the items read and
    not yet taken, an event set when there is news, and how the reading ended."""

    def __init__(self) -> None:
        self.pending: list[T] = []
        self.ready = asyncio.Event()
        self.ended = False
        self.failure: BaseException | None = None


class Preparing:
    """One run's place in its :class:`Scheduler`: counted as preparing from its creation
    until :meth:`done` (idempotent), except while it waits for a network source."""

    __slots__ = ("_counted", "_open", "_slot", "number", "scheduler")

    def __init__(self, scheduler: Scheduler, number: int) -> None:
        self.scheduler = scheduler
        self.number = number
        self._counted = True
        self._open = True
        self._slot = False
        scheduler._count()

    async def wait(self, work: Awaitable[T], *, computing: asyncio.Future[Any] | None = None) -> T:
        """Await ``work`` holding no slot, then take a slot (in arrival order) for the
        run's next CPU step. Meanwhile the run counts as preparing only while
        ``computing`` (work on this process's CPU, e.g. the knowledge-base search) runs:
        a wait for a network source (web search, a condense call) needs no CPU, so the
        answers streaming are not held for it."""
        if computing is None:
            self._away()
        else:
            self._release()
            computing.add_done_callback(lambda _future: self._away())
        value = await work
        await self._admit()
        return value

    def done(self) -> None:
        """Stop counting the run and free its slot: its model is called, or it ended."""
        self._open = False
        self._away()

    async def _admit(self) -> None:
        if not self._open:
            return
        if not self._counted:
            self._counted = True
            self.scheduler._count()
        if not self._slot:
            await self.scheduler._take(self.number)
            self._slot = True

    def _release(self) -> None:
        if self._slot:
            self._slot = False
            self.scheduler._give()

    def _away(self) -> None:
        self._release()
        if self._counted:
            self._counted = False
            self.scheduler._uncount()


class PacedBackend(WrappedBackend):
    """An :class:`~gcite.generate.backends.LLMBackend` whose answers its
    :class:`Scheduler` paces and coalesces (:meth:`Scheduler.answer`); ``name``,
    :meth:`warm_up`, :meth:`aclose` and every other attribute are the inner backend's
    (:class:`~gcite.generate.backends.WrappedBackend`)."""

    def __init__(self, inner: LLMBackend, scheduler: Scheduler) -> None:
        super().__init__(inner)
        self.scheduler = scheduler

    def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]] = (),
        query: str = "",
        usage: Usage | None = None,
    ) -> AsyncIterator[str | Reasoning]:
        """The inner stream, paced and coalesced."""
        inner = self.inner.stream(messages, chunks=chunks, query=query, usage=usage)
        return self.scheduler.answer(inner)


def _is_text(item: object) -> bool:
    return bool(item) and isinstance(item, str | Reasoning)


async def _in_pool(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on ``pool``, in a copy of this task's context (as ``to_thread``)."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(pool, call)


__all__ = ["Clock", "Knobs", "MonotonicClock", "PacedBackend", "Preparing", "Scheduler"]
