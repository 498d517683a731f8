"""The JobLog contract: one suite every keeper of indexing jobs passes.

Subclass :class:`JobLogContract` in a pytest module and provide the fixture ``new_log``: a
function ``keep -> JobLog`` (:data:`NewLog`) giving an empty
:class:`gcite.knowledge.jobs.JobLog` that keeps the newest ``keep`` jobs and records this
process as the owner of its jobs. Each test uses batches of its own. Nothing here knows
where the jobs are kept. Needs pytest (the ``testing`` extra).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

from gcite.knowledge.admin import DocumentInfo
from gcite.knowledge.jobs import Job, JobLog, replace_job

NewLog = Callable[[int], JobLog]


def _job(name: str = "守则") -> Job:
    doc_id = str(uuid.uuid4())
    document = DocumentInfo(
        doc_id,
        f"{name}.md",
        "物业手册",
        "",
        0,
        metadata={"access_roles": ["安保主管", "物业经理"], "楼栋": 3},
        created_at=1_700_000_000,
        position=2,
    )
    return Job(
        f"20260101000000{doc_id}",
        document,
        created_at=1_700_000_100.5,
        roles_change=((), ("安保主管", "物业经理")),
    )


class JobLogContract:
    """Behaviour of :class:`gcite.knowledge.jobs.JobLog`, wherever the jobs are kept."""

    def test_satisfies_the_protocol(self, new_log: NewLog) -> None:
        assert isinstance(new_log(10), JobLog)

    def test_a_batch_never_recorded_is_unknown(self, new_log: NewLog) -> None:
        assert new_log(10).get("20260101000000nothing") is None

    def test_a_recorded_job_reads_back_as_recorded(self, new_log: NewLog) -> None:
        log, job = new_log(10), _job()
        log.record(job)
        assert log.get(job.batch) == job
        assert log.get(job.batch + "x") is None

    def test_updates_are_read_in_order_up_to_the_outcome(self, new_log: NewLog) -> None:
        log, job = new_log(10), _job()
        log.record(job)
        running = replace_job(job, status="indexing", started_at=1_700_000_101.0)
        log.update(running)
        assert log.get(job.batch) == running
        stored = dataclasses.replace(job.document, segments=7, word_count=420, tokens=300)
        done = replace_job(
            running,
            status="completed",
            document=stored,
            completed_at=1_700_000_109.0,
            roles_change=None,
        )
        log.update(done)
        assert log.get(job.batch) == done

    def test_a_failure_keeps_its_reason_status_and_code(self, new_log: NewLog) -> None:
        log, job = new_log(10), _job()
        log.record(job)
        failed = replace_job(
            job,
            status="error",
            completed_at=1_700_000_102.0,
            error="文件无法解析: 不是有效的 docx",
            error_status=422,
            error_code="invalid_param",
        )
        log.update(failed)
        assert log.get(job.batch) == failed

    def test_a_live_process_keeps_its_unfinished_jobs_unfinished(self, new_log: NewLog) -> None:
        log, job = new_log(10), _job()
        log.record(job)
        log.beat()
        assert log.get(job.batch) == job
        running = replace_job(job, status="indexing", started_at=1.0)
        log.update(running)
        log.beat()
        assert log.get(job.batch) == running

    def test_only_the_newest_jobs_are_kept(self, new_log: NewLog) -> None:
        log = new_log(3)
        jobs = [_job(f"文档{i}") for i in range(5)]
        for job in jobs:
            log.record(job)
        assert [log.get(j.batch) for j in jobs] == [None, None, *jobs[2:]]
        log.update(replace_job(jobs[0], status="completed"))  # gone: not brought back
        assert log.get(jobs[0].batch) is None

    def test_recording_a_batch_again_starts_it_over(self, new_log: NewLog) -> None:
        log, job = new_log(2), _job()
        log.record(replace_job(job, status="error", error="旧的失败"))
        log.record(job)
        assert log.get(job.batch) == job
        other = _job("其他")
        log.record(other)  # the batch recorded again counts as the newer one
        assert log.get(job.batch) == job and log.get(other.batch) == other

    def test_close_is_idempotent(self, new_log: NewLog) -> None:
        log: Any = new_log(10)
        log.close()
        log.close()


__all__ = ["JobLogContract", "NewLog"]
