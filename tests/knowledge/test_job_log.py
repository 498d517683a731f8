"""Indexing jobs: the JobLog contract for each keeper, and what only the shared one does.

:class:`~gcite.knowledge.stores.pgjobs.PgJobLog` runs on a real PostgreSQL
(``tests/support/pg.py``); a "dead" process is one this test started and killed, a process
on "another machine" one recorded with another host, its lease run out on an injected clock.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from gcite.errors import StoreError
from gcite.knowledge.admin import DocumentInfo, Upserted
from gcite.knowledge.indexing import Indexer
from gcite.knowledge.jobs import ORPHANED, Job, JobLog, MemoryJobLog, replace_job
from gcite.knowledge.stores.pgjobs import Owner, PgJobLog
from gcite.processes import LEASE_S, process_start
from gcite.testing.joblog_contract import JobLogContract, NewLog
from support.clock import ManualClock
from support.pg import fresh_database


class TestMemoryJobLog(JobLogContract):
    @pytest.fixture
    def new_log(self) -> NewLog:
        return lambda keep: MemoryJobLog(keep=keep)


@pytest.fixture(scope="module")
def jobs_url(pgvector_url: str) -> str:
    return fresh_database(pgvector_url, "jobs")


@pytest.fixture
def opened() -> Iterator[list[JobLog]]:
    logs: list[JobLog] = []
    yield logs
    for log in logs:
        log.close()


class TestPgJobLog(JobLogContract):
    @pytest.fixture
    def new_log(self, pgvector_url: str, opened: list[JobLog]) -> NewLog:
        def make(keep: int) -> JobLog:
            log = PgJobLog(fresh_database(pgvector_url, "jobs"), keep=keep)
            opened.append(log)
            return log

        return make


def _job() -> Job:
    doc_id = str(uuid.uuid4())
    return Job(f"20260101000000{doc_id}", DocumentInfo(doc_id, "守则.md", "物业手册", "", 0))


def _dead_owner() -> Owner:
    """A process on this machine that ran and exited (reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    start = process_start(proc.pid)
    assert start is not None
    proc.kill()
    proc.wait()
    return Owner(Owner.this_process().host, proc.pid, start)


def test_every_process_reads_the_jobs_another_recorded(jobs_url: str, opened: list[JobLog]) -> None:
    writer, reader = PgJobLog(jobs_url), PgJobLog(jobs_url)
    opened += [writer, reader]
    job = _job()
    writer.record(job)
    assert reader.get(job.batch) == job
    running = replace_job(job, status="indexing", started_at=5.0)
    writer.update(running)
    assert reader.get(job.batch) == running


def test_an_unfinished_job_of_a_dead_process_on_this_machine_reads_as_failed(
    jobs_url: str, opened: list[JobLog]
) -> None:
    crashed, reader = PgJobLog(jobs_url, owner=_dead_owner()), PgJobLog(jobs_url)
    opened += [crashed, reader]
    waiting, running, done = _job(), _job(), _job()
    crashed.record(waiting)
    crashed.record(running)
    crashed.update(replace_job(running, status="indexing", started_at=7.0))
    crashed.record(done)
    crashed.update(replace_job(done, status="completed", completed_at=9.0))
    for job in (waiting, running):
        seen = reader.get(job.batch)
        assert seen is not None
        assert (seen.status, seen.error, seen.error_status) == ("error", ORPHANED, 503)
        assert seen.completed_at > 0
    finished = reader.get(done.batch)
    assert finished is not None and (finished.status, finished.error) == ("completed", None)


def test_a_job_of_another_machine_fails_once_its_lease_ran_out(
    jobs_url: str, opened: list[JobLog]
) -> None:
    clock = ManualClock(10_000)
    remote = PgJobLog(jobs_url, owner=Owner("another-host/boot", 4242, 77), clock=clock.now)
    local = PgJobLog(jobs_url, clock=clock.now)
    opened += [remote, local]
    job = _job()
    remote.record(job)
    clock.advance(LEASE_S)  # exactly the lease: still alive
    assert local.get(job.batch) == job
    remote.beat()  # its heartbeat
    clock.advance(LEASE_S)
    assert local.get(job.batch) == job
    clock.advance(1)
    seen = local.get(job.batch)
    assert seen is not None and (seen.status, seen.error) == ("error", ORPHANED)
    # a process judged dead loses nothing: its outcome, when it comes, is what reads
    remote.update(replace_job(job, status="completed", completed_at=clock.now()))
    seen = local.get(job.batch)
    assert seen is not None and seen.status == "completed"


def test_the_log_of_an_unreachable_database_raises_store_error() -> None:
    log = PgJobLog("postgresql://nobody:x@127.0.0.1:1/none")
    with pytest.raises(StoreError):
        log.get("20260101000000x")
    log.close()


class _Admin:
    """What :meth:`Indexer.submit` calls on an admin, the write held until released."""

    def __init__(self) -> None:
        import threading

        self.release = threading.Event()

    def plan_upsert(self, dataset: str, **_: object) -> object:
        from types import SimpleNamespace

        doc = DocumentInfo(str(uuid.uuid4()), "守则.md", dataset, "", 0)
        return SimpleNamespace(document=doc, roles_change=None)

    def run_upsert(self, planned: object, data: bytes) -> Upserted:
        assert self.release.wait(120)  # a hang guard
        doc = planned.document  # type: ignore[attr-defined]
        if data == b"bad":
            raise StoreError("嵌入服务不可用")
        return Upserted(dataclasses.replace(doc, segments=3), created=True)


def test_an_indexer_writes_every_state_where_another_process_reads_it(
    jobs_url: str, opened: list[JobLog]
) -> None:
    reader = PgJobLog(jobs_url)
    opened.append(reader)
    indexer, admin = Indexer(PgJobLog(jobs_url)), _Admin()
    try:
        job, done = indexer.submit(admin, "物业手册", name="守则", data=b"ok", batch=lambda d: d)
        first = reader.get(job.batch)
        assert first is not None and first.status in ("waiting", "indexing")
        admin.release.set()
        finished = done.result(timeout=60)
        seen = reader.get(job.batch)
        assert seen == finished and seen.status == "completed" and seen.document.segments == 3
        bad, failed = indexer.submit(admin, "物业手册", name="坏", data=b"bad", batch=lambda d: d)
        failed.result(timeout=60)
        seen = reader.get(bad.batch)
        assert seen is not None and (seen.status, seen.error) == ("error", "嵌入服务不可用")
        assert (seen.error_status, seen.error_code) == (503, "service_unavailable")
    finally:
        admin.release.set()
        indexer.close()
