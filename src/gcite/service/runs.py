"""The lifetime of one chat run behind HTTP: a run handle and the stop registry.

:class:`RunHandle` owns one :class:`~gcite.chatflow.ChatRun` (in the spirit of haystack's
pipeline stream handle): a producer task runs the chatflow; the Plan B chunks are stored
when the merge node finishes (in a task of their own: the run goes on to the model call,
while the stream sends the merge node's event, and every frame after it, only once they
are stored - the frame queue holds that task, and :meth:`RunHandle.frames` waits for it,
pinging meanwhile); the outcome is stored EXACTLY ONCE, when the run ends
(before its last frames are sent) - succeeded, failed, stopped by ``/stop``, or abandoned
by its client (stored as ``stopped`` with ``error: "client disconnected"``, its partial
answer and the chunks that answer cites). Streaming (:meth:`RunHandle.frames`) adds
Dify's ping after ``ping_interval`` seconds of silence; a client that goes away cancels
the producer, which closes the model call. Blocking (:meth:`RunHandle.result`) runs to
the end unless the client disconnects first.

A database failure is logged and never breaks the answer: the client still gets every
frame, and the outcome counts as stored (it is not written twice).

When the process stops (SIGTERM), :meth:`RunRegistry.interrupt_all` lets the runs in
flight end on their own for a while, then ends the rest as failed with :data:`INTERRUPTED`
(an ``error`` event for a stream, a 503 for a blocking call; the message is stored
``failed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

from gcite.chatflow import ChatRun, Event, NodeFinished, RunEnded, RunFailed, RunSummary
from gcite.dify.wire import PING_FRAME, DifyStream, data_frame, error_object, shown_answer
from gcite.service.store import ConversationStore

log = logging.getLogger("gcite.service")

STOP_POLL_S = 0.25
"""How often (s) a worker with running streams reads the stop records of the shared store."""

ABANDONED = "client disconnected"

INTERRUPTED = "服务正在停止，本次回答已中断，请重新提问"
"""The error of a run its process ended while it ran (stream ``error`` event, stored)."""

INTERRUPT_WAIT_S = 5.0
"""Hang guard: how long :meth:`RunRegistry.interrupt_all` waits for the interrupted runs
to store their outcome."""


class Tasks:
    """Strong references to the tasks the runs start (producers, outcome saves): the
    event loop keeps only weak ones, and a producer whose client left must still store
    its outcome. The app's lifespan keeps one for the process (:attr:`RunRegistry.tasks`)."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()

    def start(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """``coro`` as a task, referenced until it is done."""
        task = asyncio.create_task(coro)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    def __len__(self) -> int:
        return len(self._running)


@dataclass(frozen=True)
class Outcome:
    """How a run ended for its caller: the summary and, when it failed, the error event."""

    summary: RunSummary
    failure: RunFailed | None = None
    abandoned: bool = False
    crashed: bool = False


class RunRegistry:
    """Running streamed runs by ``task_id``, for ``POST /chat-messages/{task_id}/stop``."""

    def __init__(
        self, conversations: ConversationStore | None = None, tasks: Tasks | None = None
    ) -> None:
        self.tasks = tasks or Tasks()
        self._runs: dict[str, tuple[str, RunHandle]] = {}
        self._live: set[RunHandle] = set()
        self._conversations = conversations
        self._watcher: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def live(self, handle: RunHandle) -> Iterator[None]:
        """Count ``handle`` as running here (streamed or blocking) while in the block."""
        self._live.add(handle)
        try:
            yield
        finally:
            self._live.discard(handle)

    async def interrupt_all(self, grace_s: float) -> int:
        """The process stops: wait up to ``grace_s`` seconds for the live runs to end,
        then interrupt the rest (:meth:`RunHandle.interrupt`) and wait until their outcome
        is stored (at most :data:`INTERRUPT_WAIT_S`). Returns how many were interrupted."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        while self._live and loop.time() < deadline:
            await asyncio.sleep(0.05)
        left = list(self._live)
        for handle in left:
            handle.interrupt()
        waits = [w for w in (h.ending() for h in left) if w is not None]
        if waits:
            await asyncio.wait(waits, timeout=INTERRUPT_WAIT_S)
        return len(left)

    def add(self, task_id: str, owner: str, handle: RunHandle) -> None:
        """Register a running run of ``owner``; with a shared conversation store, start the
        watcher that takes stop records other workers wrote (one query per
        :data:`STOP_POLL_S` for all the runs of this process)."""
        self._runs[task_id] = (owner, handle)
        if self._conversations is not None and (self._watcher is None or self._watcher.done()):
            self._watcher = self.tasks.start(self._watch())

    async def _watch(self) -> None:
        assert self._conversations is not None
        while self._runs:
            await asyncio.sleep(STOP_POLL_S)
            try:
                found = await self._conversations.call(
                    self._conversations.take_stops, list(self._runs)
                )
            except Exception:
                log.warning("stop records could not be read", exc_info=True)
                continue
            for task_id, owner in found:
                self.stop(task_id, owner)

    async def stop_anywhere(self, task_id: str, owner: str) -> None:
        """Stop the run here, or leave a stop record for the worker that runs it."""
        if not self.stop(task_id, owner) and self._conversations is not None:
            await self._conversations.call(self._conversations.request_stop, task_id, owner)

    def remove(self, task_id: str) -> None:
        """Forget a run (it ended, or its stream closed)."""
        self._runs.pop(task_id, None)

    def stop(self, task_id: str, owner: str) -> bool:
        """Stop the run of ``owner`` with ``task_id`` in this process; anything else silently
        does nothing (Dify: a wrong user or an unknown task still answers success). True when
        the run is here (whoever owns it)."""
        entry = self._runs.get(task_id)
        if entry is not None and entry[0] == owner:
            entry[1].stop()
        return entry is not None


class RunHandle:
    """One run's lifetime (see the module docstring).

    ``conversations``/``message_id``: where the outcome is stored; ``ping_interval``: s;
    ``tasks``: where its tasks are kept (the process's :attr:`RunRegistry.tasks`; by
    default its own, when the caller keeps the handle until the run has ended).
    """

    def __init__(
        self,
        run: ChatRun,
        wire: DifyStream,
        *,
        conversations: ConversationStore,
        message_id: str,
        ping_interval: float,
        tasks: Tasks | None = None,
    ) -> None:
        self.tasks = tasks or Tasks()
        self.run = run
        self.wire = wire
        self.conversations = conversations
        self.message_id = message_id
        self.ping_interval = max(0.01, ping_interval)
        self._queue: asyncio.Queue[bytes | asyncio.Task[None] | None] | None = None
        self._chunks_stored: asyncio.Task[None] | None = None
        self._chunks_written = False  # the Plan B write succeeded: not sent again
        self._producer: asyncio.Task[None] | None = None
        self._stopping = False
        self._interrupting = False
        self._persisted = False
        self._failure: RunFailed | None = None
        self._ended: RunSummary | None = None
        self._crashed = False
        self._last_sent = time.monotonic()

    # ------------------------------------------------------------------ storing
    def _store(self, summary: RunSummary, status: str, error: str | None) -> None:
        metadata = self.wire_metadata(summary)
        style = self.wire.env.citation_style
        self.conversations.finish_message(
            self.message_id,
            answer=summary.answer,
            shown_answer=None if style == "markers" else shown_answer(summary, style),
            status=status,
            error=error,
            cited_ids=summary.cited_ids,
            metadata=metadata,
            chunk_metadata=None if self._chunks_written else summary.chunk_metadata,
        )

    @staticmethod
    def wire_metadata(summary: RunSummary) -> dict[str, Any]:
        """The stored message metadata: what ``message_end`` carries."""
        from gcite.dify.wire import message_metadata

        return message_metadata(summary)

    async def _store_chunks(self) -> None:
        try:
            await self.conversations.call(
                self.conversations.set_chunks, self.message_id, self.run.chunk_metadata
            )
            self._chunks_written = True
        except Exception:
            log.exception("could not store the chunks of message %s", self.message_id)

    async def _persist(self, summary: RunSummary, *, abandoned: bool = False) -> None:
        """Store the outcome, once. An abandoned run that had not ended is ``stopped``."""
        if self._persisted:
            return
        self._persisted = True
        error: str | None
        if abandoned and summary.status not in ("succeeded", "failed"):
            status, error = "stopped", ABANDONED
        else:
            status = {"succeeded": "normal", "failed": "failed"}.get(summary.status, "stopped")
            error = summary.error
        # its own task: a producer cancelled while the save waits (the client went away,
        # a stop) cannot drop it; the outcome is written after the chunks
        await asyncio.shield(self.tasks.start(self._save(summary, status, error)))

    async def _save(self, summary: RunSummary, status: str, error: str | None) -> None:
        if self._chunks_stored is not None:
            await self._chunks_stored
        try:
            await self.conversations.call(self._store, summary, status, error)
        except Exception:
            log.exception("could not store message %s", self.message_id)

    async def _handle(self, event: Event) -> None:
        """Store at the points where the state is final (before the event is sent)."""
        if isinstance(event, NodeFinished) and event.node == "merge":
            # Plan B: the chunks are stored before this event is sent, but the run does not
            # wait for the write: the model call starts meanwhile, and the stream sends this
            # event (and everything after it) once the write is done (frames()).
            self._chunks_stored = self.tasks.start(self._store_chunks())
            if self._queue is not None:
                self._queue.put_nowait(self._chunks_stored)
        elif isinstance(event, RunEnded | RunFailed):
            if isinstance(event, RunFailed):
                self._failure = event
            self._ended = event.summary
            _note_run(event.summary)
            await self._persist(event.summary)

    # ------------------------------------------------------------------ producer
    async def _produce(self) -> None:
        try:
            try:
                async for event in self.run.events():
                    await self._handle(event)
                    self._send(event)
            except asyncio.CancelledError:
                if self._interrupting:  # the process stops: a failed run, said so
                    ending = self.run.interrupted(INTERRUPTED)
                elif self._stopping:
                    ending = self.run.stopped()
                else:  # the client went away: keep what came, then stop
                    await self._persist(self.run.summary(), abandoned=True)
                    raise
                for event in ending:
                    await self._handle(event)
                    self._send(event)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("chatflow failed")
            self._crashed = True
            if self._queue is not None:
                env = self.wire.env
                self._queue.put_nowait(
                    data_frame(error_object(env, "internal_server_error", 500, "Run failed."))
                )
        finally:
            if self._queue is not None:
                self._queue.put_nowait(None)

    def _send(self, event: Event) -> None:
        if self._queue is not None:
            frames = self.wire.frames(event)
            if frames:
                self._queue.put_nowait(frames)

    def stop(self) -> None:
        """``/stop``: cancel the producer (closing the model call); the run then ends as
        ``stopped`` with its partial answer. No effect once the run has ended."""
        producer = self._producer
        if self.run.status == "running" and producer is not None and not producer.done():
            self._stopping = True
            producer.cancel()

    def interrupt(self) -> None:
        """The process stops: cancel the producer; the run then ends as failed with
        :data:`INTERRUPTED` and its partial answer. No effect once the run has ended."""
        producer = self._producer
        if self.run.status == "running" and producer is not None and not producer.done():
            self._interrupting = True
            producer.cancel()

    def ending(self) -> asyncio.Task[None] | None:
        """The producer task (done once the outcome is stored), when the run started."""
        return self._producer

    # ------------------------------------------------------------------ streaming
    async def frames(self, query: str) -> AsyncIterator[bytes]:
        """The SSE bytes of the run: ``workflow_started``, every event, pings."""
        queue: asyncio.Queue[bytes | asyncio.Task[None] | None] = asyncio.Queue()
        self._queue = queue
        self._producer = producer = self.tasks.start(self._produce())
        pinger = asyncio.create_task(self._ping())
        try:
            self._last_sent = time.monotonic()
            yield data_frame(self.wire.start(query))
            item = await queue.get()
            while item is not None:
                if isinstance(item, asyncio.Task):  # a write the next frames come after
                    while not item.done():  # (pings meanwhile: they carry nothing)
                        await asyncio.wait({item}, timeout=self.ping_interval)
                        if not item.done():
                            self._last_sent = time.monotonic()
                            yield PING_FRAME
                    item = await queue.get()
                    continue
                frame, after = _queued_frames(queue, item)
                self._last_sent = time.monotonic()
                yield frame
                item = await queue.get() if after is _DRY else after
        finally:
            pinger.cancel()
            if not producer.done():  # the client went away: cancel the model call
                producer.cancel()

    async def _ping(self) -> None:
        """Queue Dify's ``event: ping`` whenever ``ping_interval`` passed without a frame."""
        queue = self._queue
        assert queue is not None
        while True:
            wait = self._last_sent + self.ping_interval - time.monotonic()
            await asyncio.sleep(max(0.0, wait))
            if time.monotonic() - self._last_sent >= self.ping_interval:
                self._last_sent = time.monotonic()
                queue.put_nowait(PING_FRAME)

    # ------------------------------------------------------------------ blocking
    async def result(self, disconnected: Callable[[], Coroutine[Any, Any, None]] | None) -> Outcome:
        """Run to the end; ``disconnected`` returns when the client went away, and then the
        run is cancelled (closing the model call) and stored as abandoned."""
        self._producer = runner = self.tasks.start(self._produce())
        watcher = asyncio.create_task(_forever() if disconnected is None else disconnected())
        try:
            await asyncio.wait({runner, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
        if not runner.done():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            return Outcome(self.run.summary(), abandoned=True)
        summary = self._ended or self.run.summary()
        return Outcome(summary, failure=self._failure, crashed=self._crashed)


_DRY = b""
"""What :func:`_queued_frames` returns after the frames when the queue ran dry (no frame
is empty: :meth:`RunHandle._send` queues none)."""


def _queued_frames(
    queue: asyncio.Queue[bytes | asyncio.Task[None] | None], first: bytes
) -> tuple[bytes, bytes | asyncio.Task[None] | None]:
    """``first`` and the frames queued right behind it, joined (the events a run produces
    in one go reach the client in one write), and the item that ended them: a write to
    wait for, None (the end), or :data:`_DRY` when the queue ran dry."""
    parts = [first]
    while not queue.empty():
        item = queue.get_nowait()
        if not isinstance(item, bytes):
            return b"".join(parts), item
        parts.append(item)
    return (first if len(parts) == 1 else b"".join(parts)), _DRY


def _note_run(summary: RunSummary) -> None:
    """Copy the run's times and cited count into the request's access log line."""
    from gcite.service.ops import current

    record = current()
    if record is None:
        return
    record.timings.update(summary.timings)
    first = summary.usage.time_to_first_token
    if first is not None:
        record.timings["first_token"] = first
    record.cited = len(summary.cited_ids)


async def _forever() -> None:
    await asyncio.Event().wait()


async def wait_for_disconnect(receive: Callable[[], Awaitable[Any]]) -> None:
    """Return when the ASGI ``receive`` channel reports ``http.disconnect``."""
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return


__all__ = [
    "ABANDONED",
    "INTERRUPTED",
    "Outcome",
    "RunHandle",
    "RunRegistry",
    "Tasks",
    "wait_for_disconnect",
]
