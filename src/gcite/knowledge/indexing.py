"""Asynchronous indexing, as Dify's Knowledge API has it: a document is accepted at once
and indexed by a worker; its ``batch`` reports the progress.

:class:`Indexer` is owned by the :class:`~gcite.knowledge.access.KnowledgeAccess` of the
service (created with the app, closed by its lifespan). :meth:`Indexer.submit` checks
what can be checked at once (the dataset, the name, the document replaced: a
:class:`~gcite.knowledge.admin.ManageError` then), records a :class:`Job` in status
``waiting`` in the knowledge base's :class:`~gcite.knowledge.jobs.JobLog` and runs the
write (:meth:`LocalAdmin.upsert_document`) on a worker thread; writes to one dataset wait
for each other (the admin's per-dataset lock), writes to other datasets run beside them.
Statuses are Dify's ``indexing_status`` values: ``waiting`` -> ``indexing`` ->
``completed`` | ``error`` (with the Chinese reason in ``error``; nothing of the document
becomes visible then). Every state goes to the log, so :meth:`Indexer.job` on any process
of a shared (pgvector) store reads it; a state the log could not take (its database
briefly away) is answered from this process and written again at the next heartbeat.
Every :data:`~gcite.processes.HEARTBEAT_S` seconds the indexer tells the log this process
still runs its jobs (:meth:`JobLog.beat`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from gcite.errors import GciteError
from gcite.knowledge.admin import ManageError
from gcite.knowledge.jobs import KEPT_JOBS, Job, JobLog, MemoryJobLog, replace_job
from gcite.processes import HEARTBEAT_S

log = logging.getLogger("gcite.knowledge")

WORKERS = 2
"""Worker threads: one big document never holds up a write to another dataset."""


class Indexer:
    """The indexing worker of one knowledge base (module docstring). ``jobs``: where the
    jobs are kept (in memory by default); ``clock``: Unix seconds (injected by tests);
    ``heartbeat_s``: seconds between two :meth:`JobLog.beat`."""

    def __init__(
        self,
        jobs: JobLog | None = None,
        *,
        clock: Callable[[], float] = time.time,
        workers: int = WORKERS,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.jobs: JobLog = jobs if jobs is not None else MemoryJobLog()
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gcite-index")
        self._lock = threading.Lock()
        self._current: dict[str, Job] = {}  # this process's unfinished jobs, newest state
        self._unsaved: dict[str, Job] = {}  # states the log could not take yet
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(
            target=self._beat_loop, args=(heartbeat_s,), name="gcite-index-beat", daemon=True
        )
        self._heartbeat.start()

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
        raises :class:`ManageError` for what is wrong at once, :class:`StoreError` when the
        job cannot be recorded; else the waiting job (its ``batch`` made by
        ``batch(document_id)``) and a future of the finished one."""
        planned = admin.plan_upsert(dataset, name=name, metadata=metadata, replace=replace)
        job = Job(
            batch(planned.document.id),
            planned.document,
            created_at=self._clock(),
            roles_change=planned.roles_change,
        )
        self.jobs.record(job)  # a job no other process could see is not started
        with self._lock:
            self._current[job.batch] = job

        def work() -> Job:
            started = self._keep(replace_job(job, status="indexing", started_at=self._clock()))
            try:
                result = admin.run_upsert(planned, data)
            except ManageError as exc:
                return self._keep(self._failed(started, str(exc), exc.status, exc.code))
            except GciteError as exc:  # the store or the embedder failed
                return self._keep(self._failed(started, str(exc), 503, "service_unavailable"))
            except Exception as exc:  # a bug: reported, never a hung batch
                log.exception("indexing %s failed", job.document.name)
                return self._keep(self._failed(started, f"索引失败: {exc}", 500, "internal_error"))
            done = replace_job(
                started,
                status="completed",
                document=result.document,
                completed_at=self._clock(),
                roles_change=result.roles_change,
            )
            return self._keep(done)

        return job, self._pool.submit(work)

    def _failed(self, job: Job, message: str, status: int, code: str) -> Job:
        return replace_job(
            job,
            status="error",
            completed_at=self._clock(),
            error=message,
            error_status=status,
            error_code=code,
        )

    def _keep(self, job: Job) -> Job:
        """Write ``job``'s new state to the log (kept for the heartbeat when it fails)."""
        with self._lock:
            if job.status in ("completed", "error"):
                self._current.pop(job.batch, None)
            else:
                self._current[job.batch] = job
        try:
            self.jobs.update(job)
        except GciteError:
            log.warning("could not record the state of indexing job %s", job.batch, exc_info=True)
            with self._lock:
                self._unsaved[job.batch] = job
        else:
            with self._lock:
                self._unsaved.pop(job.batch, None)
        return job

    def job(self, batch: str) -> Job | None:
        """The job of ``batch`` as the log has it (any process's, for a shared log), or as
        this process last knew it when the log could not take that yet; ``None`` when not
        kept. Raises :class:`StoreError` when the log cannot be read."""
        with self._lock:
            unsaved = self._unsaved.get(batch)
        return unsaved if unsaved is not None else self.jobs.get(batch)

    def _beat_loop(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.beat()

    def beat(self) -> None:
        """Refresh this process's lease on its jobs and write the states the log could
        not take before (every ``heartbeat_s``; failures are logged)."""
        with self._lock:
            busy = bool(self._current)
            unsaved = list(self._unsaved.values())
        try:
            if busy:
                self.jobs.beat()
            for job in unsaved:
                self._keep(job)
        except GciteError:
            log.warning("could not refresh this process's indexing jobs", exc_info=True)

    def close(self) -> None:
        """Finish the running jobs, stop the workers and the heartbeat, close the log.
        Idempotent."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._stop.set()
        if self._heartbeat.is_alive() and self._heartbeat is not threading.current_thread():
            self._heartbeat.join()
        self.beat()  # the last states the log could not take
        self.jobs.close()


__all__ = ["KEPT_JOBS", "WORKERS", "Indexer", "Job", "replace_job"]
