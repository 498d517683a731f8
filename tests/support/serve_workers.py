"""A real ``gcite serve --workers N`` for tests: the CLI in a subprocess on a free port.

:class:`ServeWorkers` starts ``gcite serve --workers N --data-dir <dir>`` (environment
without ``GCITE_*`` except what the test passes), writes its output (the start-up lines,
the workers' JSON access log lines, one per request, with the serving ``pid``) to a file,
waits until the service answers and stops it (SIGTERM, then kill) at the end.
:meth:`ServeWorkers.pid_of` finds the worker that served a request by the ``X-Request-Id``
the test sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from gcite.testing import free_port


def children(pid: int, flag: str = "--fd") -> list[int]:
    """The process ids of ``pid``'s children (``ps``) started with ``flag``: the chat
    workers of ``gcite serve --workers N`` (``--fd``), or its knowledge process
    (``--knowledge-fd``)."""
    out = subprocess.run(
        ["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pid)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if fields and flag in fields[1:]:
            found.append(int(fields[0]))
    return found


class ServeWorkers:
    """``gcite serve --workers <workers>`` on ``data_dir`` (see the module docstring)."""

    def __init__(
        self,
        data_dir: Path,
        workers: int,
        log_path: Path,
        env: dict[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.workers = workers
        self.log_path = log_path
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
        self.env.update(env or {})
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ServeWorkers:
        gcite = Path(sys.executable).parent / "gcite"
        self._log = self.log_path.open("wb")
        command = [str(gcite), "serve", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        self.proc = subprocess.Popen(
            [*command, "--workers", str(self.workers)],
            env=self.env,
            stdout=self._log,
            stderr=self._log,
        )
        try:
            self._wait_started()
            self.worker_pids = set(children(self.proc.pid))
            self._warm()
        except BaseException:
            self.__exit__()  # never leave the service running behind a failed start
            raise
        return self

    def _wait_started(self) -> None:
        """Until every worker answers (each has its own listening socket); a hang guard."""
        assert self.proc is not None
        deadline = time.monotonic() + 300
        while True:
            try:
                if (
                    httpx.get(f"{self.base}/health", timeout=5).status_code == 200
                    and len(children(self.proc.pid)) == self.workers
                ):
                    return
            except httpx.TransportError:
                pass
            assert self.proc.poll() is None, self.log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, "gcite serve --workers did not start"
            time.sleep(0.3)

    def _warm(self) -> None:
        """One /health per worker (each answers through its own socket once imported)."""
        deadline = time.monotonic() + 120
        seen: set[int] = set()
        while not self.worker_pids <= seen and time.monotonic() < deadline:
            request_id = uuid.uuid4().hex
            try:
                httpx.get(f"{self.base}/health", headers={"X-Request-Id": request_id}, timeout=10)
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            seen.add(self.pid_of(request_id))

    def replaced(self, pid: int) -> set[int]:
        """Wait until worker ``pid`` has a replacement and every worker answers (a hang
        guard, not a speed bound); returns the workers' pids (also :attr:`worker_pids`)."""
        assert self.proc is not None
        deadline = time.monotonic() + 120
        while True:
            now = set(children(self.proc.pid))
            if len(now) == self.workers and pid not in now:
                break
            assert self.proc.poll() is None, self.log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, now
            time.sleep(0.2)
        self.worker_pids = now
        self._warm()
        return now

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def log_lines(self) -> list[dict[str, Any]]:
        """Every JSON access log line written so far."""
        lines = []
        for raw in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            start = raw.find("{")
            if start < 0:
                continue
            try:
                entry = json.loads(raw[start:])
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict) and "request_id" in entry:
                lines.append(entry)
        return lines

    def pid_of(self, request_id: str, timeout: float = 30.0) -> int:
        """The pid of the worker that served ``request_id`` (its access log line)."""
        deadline = time.monotonic() + timeout
        while True:
            for entry in self.log_lines():
                if entry["request_id"] == request_id:
                    return int(entry["pid"])
            assert time.monotonic() < deadline, f"no access log line for {request_id}"
            time.sleep(0.05)


__all__ = ["ServeWorkers", "children"]
