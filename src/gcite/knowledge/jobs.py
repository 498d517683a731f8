"""Indexing jobs and the :class:`JobLog` seam every process of one knowledge base reads.

A :class:`Job` is one indexing run of the Knowledge API (Dify's ``batch``): the
:class:`~gcite.knowledge.indexing.Indexer` of the process that accepted the write records
it (:meth:`JobLog.record`) and its later states (:meth:`JobLog.update`); the
``indexing-status`` endpoint of any process reads it (:meth:`JobLog.get`). Where the log
lives follows where the store lives (:func:`gcite.knowledge.access.open_job_log`):

- :class:`MemoryJobLog`: the embedded stores (Qdrant Edge, a Qdrant server with the data
  dir's catalog), which one knowledge process writes (the chat workers of ``gcite serve
  --workers N`` forward writes and status calls to it);
- :class:`~gcite.knowledge.stores.pgjobs.PgJobLog`: ``store = "pgvector"``, where every
  worker on every machine opens the store itself: the jobs are rows of the store's
  database, so a status poll that lands on another process (nginx, another worker)
  sees the job as it is.

A job still ``waiting`` or ``indexing`` whose process is gone (killed, machine lost:
:func:`gcite.processes.is_dead`) reads as ``error`` with :data:`ORPHANED`; its write, one
PostgreSQL transaction, left the old version of the document. Each log keeps the newest
``keep`` jobs (:data:`KEPT_JOBS`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gcite.knowledge.admin import DocumentInfo

if TYPE_CHECKING:
    pass

KEPT_JOBS = 1000
"""Jobs a log remembers (the newest; older batches answer from the stored documents)."""

UNFINISHED = ("waiting", "indexing")

ORPHANED = "索引中断：处理它的服务进程已退出（崩溃或被强制结束），文档保持原来的版本，请重新提交"
"""The ``error`` of a job whose process died before it finished."""


@dataclass(frozen=True)
class Job:
    """One indexing run. ``batch``: its id; ``document``: the document as it will be
    (id and name known at once; segments when done); ``status``: Dify's
    ``indexing_status`` (``waiting`` -> ``indexing`` -> ``completed`` | ``error``); times
    are Unix seconds (0 until reached); ``error``: the Chinese reason of a failure,
    ``error_status`` / ``error_code`` its HTTP status and Dify code; ``roles_change``:
    ``(before, after)`` when the write changes the document's ``access_roles`` (as given
    until completed, then as stored)."""

    batch: str
    document: DocumentInfo
    status: str = "waiting"
    created_at: float = 0.0
    started_at: float = 0.0
    completed_at: float = 0.0
    error: str | None = None
    error_status: int = 0
    error_code: str = ""
    roles_change: tuple[tuple[str, ...], tuple[str, ...]] | None = None


def replace_job(job: Job, **changes: Any) -> Job:
    """``job`` with ``changes`` (a new frozen record)."""
    return replace(job, **changes)


def orphaned(job: Job, now: float) -> Job:
    """``job`` as it reads once its process is gone: ``error`` (:data:`ORPHANED`, 503)."""
    return replace_job(
        job,
        status="error",
        completed_at=job.completed_at or now,
        error=ORPHANED,
        error_status=503,
        error_code="service_unavailable",
    )


@runtime_checkable
class JobLog(Protocol):
    """Where the indexing jobs of one knowledge base are kept (module docstring). Methods
    may block (a database); failures raise :class:`~gcite.errors.StoreError`.
    Thread-safe."""

    def record(self, job: Job) -> None:
        """Keep a new ``job``, run by this process (the oldest beyond ``keep`` go)."""
        ...

    def update(self, job: Job) -> None:
        """Keep ``job``'s new state (its batch recorded by this process)."""
        ...

    def get(self, batch: str) -> Job | None:
        """The job of ``batch`` as last kept (:func:`orphaned` when unfinished and its
        process is gone); ``None`` for a batch not kept."""
        ...

    def beat(self) -> None:
        """Tell the other processes that this one still runs its unfinished jobs (called
        every :data:`gcite.processes.HEARTBEAT_S` seconds by the indexer)."""
        ...

    def close(self) -> None:
        """Release what the log holds. Idempotent."""
        ...


class MemoryJobLog:
    """:class:`JobLog` in this process's memory (the embedded stores: module docstring)."""

    def __init__(self, *, keep: int = KEPT_JOBS) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, Job] = OrderedDict()

    def record(self, job: Job) -> None:
        with self._lock:
            self._jobs.pop(job.batch, None)
            self._jobs[job.batch] = job
            while len(self._jobs) > self.keep:
                self._jobs.popitem(last=False)

    def update(self, job: Job) -> None:
        with self._lock:
            if job.batch in self._jobs:
                self._jobs[job.batch] = job

    def get(self, batch: str) -> Job | None:
        with self._lock:
            return self._jobs.get(batch)

    def beat(self) -> None:
        """Nothing to do: the jobs die with the process that keeps them."""
        return None

    def close(self) -> None:
        with self._lock:
            self._jobs.clear()


__all__ = [
    "KEPT_JOBS",
    "ORPHANED",
    "UNFINISHED",
    "Job",
    "JobLog",
    "MemoryJobLog",
    "orphaned",
    "replace_job",
]
