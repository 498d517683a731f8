"""Asynchronous indexing, as Dify's Knowledge API has it: a document is accepted at once
and indexed by a worker; its ``batch`` reports the progress.

:class:`Indexer` is owned by the :class:`~gcite.knowledge.access.KnowledgeAccess` of the
service (created with the app, closed by its lifespan). :meth:`Indexer.submit` checks
what can be checked at once (the dataset, the name, the document replaced: a
:class:`~gcite.knowledge.admin.ManageError` then), answers a :class:`Job` in status
``waiting`` and runs the write (:meth:`LocalAdmin.upsert_document`) on a worker thread;
writes to one dataset wait for each other (the admin's per-dataset lock), writes to other
datasets run beside them. Statuses are Dify's ``indexing_status`` values: ``waiting`` ->
``indexing`` -> ``completed`` | ``error`` (with the Chinese reason in ``error``; nothing of
the document becomes visible then). The last :data:`KEPT_JOBS` jobs are remembered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from gcite.errors import GciteError
from gcite.knowledge.admin import DocumentInfo, ManageError, Upserted

log = logging.getLogger("gcite.knowledge")

WORKERS = 2
"""Worker threads: one big document never holds up a write to another dataset."""
KEPT_JOBS = 1000


@dataclass(frozen=True)
class Job:
    """One indexing run. ``batch``: its id; ``document``: the document as it will be
    (id and name known at once; segments when done); ``status``: Dify's
    ``indexing_status``; times are Unix seconds (0 until reached); ``error``: the Chinese
    reason of a failure, ``error_status`` / ``error_code`` its HTTP status and Dify code;
    ``result``: the :class:`Upserted` when completed; ``roles_change``: ``(before, after)``
    when the write changes the document's ``access_roles`` (as given until completed, then
    as stored)."""

    batch: str
    document: DocumentInfo
    status: str = "waiting"
    created_at: float = 0.0
    started_at: float = 0.0
    completed_at: float = 0.0
    error: str | None = None
    error_status: int = 0
    error_code: str = ""
    result: Upserted | None = None
    roles_change: tuple[tuple[str, ...], tuple[str, ...]] | None = None


@dataclass
class _Jobs:
    lock: threading.Lock = field(default_factory=threading.Lock)
    items: OrderedDict[str, Job] = field(default_factory=OrderedDict)


class Indexer:
    """The indexing worker of one knowledge base (module docstring). ``clock``: Unix
    seconds (injected by tests)."""

    def __init__(self, *, clock: Callable[[], float] = time.time, workers: int = WORKERS) -> None:
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gcite-index")
        self._jobs = _Jobs()

    def submit(
        self,
        admin: Any,
        dataset: str,
        *,
        name: str,
        data: bytes,
        metadata: Mapping[str, Any] | None = None,
        replace: str | None = None,
        batch: Callable[[str], str],
    ) -> tuple[Job, Future[Job]]:
        """Accept a document for ``admin`` (a :class:`~gcite.knowledge.manage.LocalAdmin`):
        raises :class:`ManageError` for what is wrong at once; else the waiting job (its
        ``batch`` made by ``batch(document_id)``) and a future of the finished one."""
        planned = admin.plan_upsert(dataset, name=name, metadata=metadata, replace=replace)
        job = Job(
            batch(planned.document.id),
            planned.document,
            created_at=self._clock(),
            roles_change=planned.roles_change,
        )
        self._store(job)

        def work() -> Job:
            self._store(replace_job(job, status="indexing", started_at=self._clock()))
            try:
                result = admin.run_upsert(planned, data)
            except ManageError as exc:
                return self._store(self._failed(job, str(exc), exc.status, exc.code))
            except GciteError as exc:  # the store or the embedder failed
                return self._store(self._failed(job, str(exc), 503, "service_unavailable"))
            except Exception as exc:  # a bug: reported, never a hung batch
                log.exception("indexing %s failed", job.document.name)
                return self._store(self._failed(job, f"索引失败: {exc}", 500, "internal_error"))
            done = replace_job(
                job,
                status="completed",
                document=result.document,
                started_at=self._current(job).started_at,
                completed_at=self._clock(),
                result=result,
                roles_change=result.roles_change,
            )
            return self._store(done)

        return job, self._pool.submit(work)

    def _failed(self, job: Job, message: str, status: int, code: str) -> Job:
        return replace_job(
            self._current(job),
            status="error",
            completed_at=self._clock(),
            error=message,
            error_status=status,
            error_code=code,
        )

    def _current(self, job: Job) -> Job:
        with self._jobs.lock:
            return self._jobs.items.get(job.batch, job)

    def _store(self, job: Job) -> Job:
        with self._jobs.lock:
            self._jobs.items[job.batch] = job
            self._jobs.items.move_to_end(job.batch)
            while len(self._jobs.items) > KEPT_JOBS:
                self._jobs.items.popitem(last=False)
        return job

    def job(self, batch: str) -> Job | None:
        """The job of ``batch`` when this indexer ran it (and still remembers it)."""
        with self._jobs.lock:
            return self._jobs.items.get(batch)

    def close(self) -> None:
        """Finish the running jobs and stop the workers. Idempotent."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def replace_job(job: Job, **changes: Any) -> Job:
    """``job`` with ``changes`` (a new frozen record)."""
    return replace(job, **changes)


__all__ = ["KEPT_JOBS", "WORKERS", "Indexer", "Job", "replace_job"]
