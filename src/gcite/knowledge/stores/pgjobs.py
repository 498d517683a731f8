"""The pgvector store's job log: indexing jobs as rows every process reads.

With ``store = "pgvector"`` every worker on every machine opens the store itself, so a
status poll may land on a process that did not accept the write. :class:`PgJobLog` keeps
the jobs in ``gcite_kb_jobs`` of the store's database (migration k0004, migrated with the
knowledge tables by :func:`~gcite.knowledge.stores.pgvector.migrate` on first use), each
with the process that runs it (:class:`Owner`) and that process's last heartbeat
(``seen_at``, refreshed by :meth:`PgJobLog.beat`). A job still unfinished whose owner is
dead (:func:`gcite.processes.is_dead`: its pid gone on this machine, or its lease of
:data:`~gcite.processes.LEASE_S` seconds run out on another) reads as ``error``
(:func:`~gcite.knowledge.jobs.orphaned`): its write transaction went with its process, the
document kept its old version. The newest ``keep`` rows are kept.

One autocommit connection, used under a lock, reconnected when it was lost. Every failure
of the driver is a :class:`~gcite.errors.StoreError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gcite.knowledge.admin import DocumentInfo
from gcite.knowledge.jobs import KEPT_JOBS, UNFINISHED, Job, orphaned
from gcite.knowledge.stores.pgvector import conninfo, migrate, pg_errors
from gcite.processes import LEASE_S, is_dead, process_start, this_host

_COLUMNS = (
    "batch, status, document, roles_change, created_at, started_at, completed_at, error, "
    "error_status, error_code, owner_host, owner_pid, owner_started, seen_at"
)
_DOCUMENT_FIELDS = frozenset(f.name for f in dataclasses.fields(DocumentInfo))


@dataclass(frozen=True)
class Owner:
    """A process as the job rows record it: machine (:func:`gcite.processes.this_host`),
    pid and start time (clock ticks since boot, 0 when unknown)."""

    host: str
    pid: int
    started: int

    @classmethod
    def this_process(cls) -> Owner:
        """The calling process."""
        pid = os.getpid()
        return cls(this_host(), pid, process_start(pid) or 0)


def _document_json(document: DocumentInfo) -> str:
    return json.dumps(dataclasses.asdict(document), ensure_ascii=False)


def _roles_json(change: tuple[tuple[str, ...], tuple[str, ...]] | None) -> str | None:
    return None if change is None else json.dumps([list(change[0]), list(change[1])])


def _job(row: tuple[Any, ...]) -> Job:
    """The :class:`Job` of a row (the first ten of :data:`_COLUMNS`)."""
    batch, status, document, roles, created, started, completed, error, e_status, code = row
    fields = {k: v for k, v in dict(document).items() if k in _DOCUMENT_FIELDS}
    change = None
    if isinstance(roles, list) and len(roles) == 2:
        change = (tuple(str(r) for r in roles[0]), tuple(str(r) for r in roles[1]))
    return Job(
        str(batch),
        DocumentInfo(**fields),
        status=str(status),
        created_at=float(created),
        started_at=float(started),
        completed_at=float(completed),
        error=error,
        error_status=int(e_status),
        error_code=str(code),
        roles_change=change,
    )


class PgJobLog:
    """:class:`~gcite.knowledge.jobs.JobLog` in the PostgreSQL database at ``url`` (module
    docstring). ``owner``: the process recorded on new jobs (this one by default);
    ``clock``: Unix seconds; ``lease_s``: how long a process on another machine may go
    without a heartbeat before its jobs read as failed."""

    def __init__(
        self,
        url: str,
        *,
        keep: int = KEPT_JOBS,
        owner: Owner | None = None,
        clock: Callable[[], float] = time.time,
        lease_s: float = LEASE_S,
    ) -> None:
        self.url = url
        self.keep = keep
        self.owner = owner or Owner.this_process()
        self.clock = clock
        self.lease_s = lease_s
        self._lock = threading.Lock()
        self._conn: Any = None
        self._migrated = False

    @contextlib.contextmanager
    def _connection(self, message: str) -> Iterator[Any]:
        """The connection (opened, and the tables migrated, on first use), under the lock."""
        import psycopg

        with self._lock, pg_errors(message, self.url):
            if not self._migrated:
                migrate(self.url)
                self._migrated = True
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = psycopg.connect(
                    conninfo(self.url), autocommit=True, connect_timeout=10
                )
            yield self._conn

    def record(self, job: Job) -> None:
        owner = self.owner
        with self._connection("无法记录索引任务") as conn:
            conn.execute(
                f"INSERT INTO gcite_kb_jobs ({_COLUMNS}) VALUES (%s, %s, %s::jsonb, %s::jsonb, "
                "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (batch) DO UPDATE SET "
                "seq = nextval(pg_get_serial_sequence('gcite_kb_jobs', 'seq')), "
                "status = EXCLUDED.status, document = EXCLUDED.document, "
                "roles_change = EXCLUDED.roles_change, created_at = EXCLUDED.created_at, "
                "started_at = EXCLUDED.started_at, completed_at = EXCLUDED.completed_at, "
                "error = EXCLUDED.error, error_status = EXCLUDED.error_status, "
                "error_code = EXCLUDED.error_code, owner_host = EXCLUDED.owner_host, "
                "owner_pid = EXCLUDED.owner_pid, owner_started = EXCLUDED.owner_started, "
                "seen_at = EXCLUDED.seen_at",
                (
                    job.batch,
                    job.status,
                    _document_json(job.document),
                    _roles_json(job.roles_change),
                    job.created_at,
                    job.started_at,
                    job.completed_at,
                    job.error,
                    job.error_status,
                    job.error_code,
                    owner.host,
                    owner.pid,
                    owner.started,
                    int(self.clock()),
                ),
            )
            conn.execute(
                "DELETE FROM gcite_kb_jobs WHERE seq <= (SELECT seq FROM gcite_kb_jobs "
                "ORDER BY seq DESC OFFSET %s LIMIT 1)",
                (self.keep,),
            )

    def update(self, job: Job) -> None:
        with self._connection("无法记录索引任务") as conn:
            conn.execute(
                "UPDATE gcite_kb_jobs SET status = %s, document = %s::jsonb, "
                "roles_change = %s::jsonb, started_at = %s, completed_at = %s, error = %s, "
                "error_status = %s, error_code = %s, seen_at = %s WHERE batch = %s",
                (
                    job.status,
                    _document_json(job.document),
                    _roles_json(job.roles_change),
                    job.started_at,
                    job.completed_at,
                    job.error,
                    job.error_status,
                    job.error_code,
                    int(self.clock()),
                    job.batch,
                ),
            )

    def get(self, batch: str) -> Job | None:
        with self._connection("无法读取索引任务") as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM gcite_kb_jobs WHERE batch = %s", (batch,)
            ).fetchone()
        if row is None:
            return None
        job = _job(row[:10])
        if job.status not in UNFINISHED:
            return job
        now = self.clock()
        record = (batch, str(row[10]), int(row[11]), int(row[12]), int(row[13]))
        if is_dead(record, host=this_host(), now=now, lease_s=self.lease_s):
            return orphaned(job, now)
        return job

    def beat(self) -> None:
        owner = self.owner
        with self._connection("无法记录索引任务") as conn:
            conn.execute(
                "UPDATE gcite_kb_jobs SET seen_at = %s WHERE owner_host = %s AND "
                "owner_pid = %s AND owner_started = %s AND status = ANY(%s)",
                (int(self.clock()), owner.host, owner.pid, owner.started, list(UNFINISHED)),
            )

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


__all__ = ["Owner", "PgJobLog"]
