"""A real nginx in front of gcite servers for tests: ``deploy/nginx/gcite.conf.template``.

:class:`Nginx` renders the shipped template (the ``${GCITE_*}`` variables only, as the
``envsubst`` line in the template does) into a fresh directory, checks it (``nginx -t``)
and runs nginx in the foreground on a free loopback port, unprivileged: no system
config, logs, pid file or temp files outside that directory. As root, nginx's workers run
as ``nobody``, so the directory is readable by all. :meth:`Nginx.upstreams_of` reads which
server answered a request (the access log's ``upstream=`` field, by ``X-Request-Id``).

Debian's ``nginx`` package provides the binary (``make nginx``, part of ``make test``).
Without it the tests skip with the reason, in CI too: the brief is that a machine where
nginx cannot be installed still runs everything else.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from gcite.testing import free_port

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "gcite.conf.template"
START_ATTEMPTS = 3


LOCAL = Path(__file__).resolve().parents[2] / ".venv" / "nginx" / "usr" / "sbin" / "nginx"
"""Where ``make nginx`` unpacks Debian's package when apt-get cannot install it."""


def nginx_binary() -> Path | None:
    """Debian's ``/usr/sbin/nginx``, one on PATH, or the one ``make nginx`` unpacked."""
    for candidate in ("/usr/sbin/nginx", shutil.which("nginx"), str(LOCAL)):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def render(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``${NAME}`` of ``values`` replaced (envsubst with a list of
    names); every other ``$`` (nginx's variables) is left alone. Raises KeyError for a
    ``${GCITE_*}`` name without a value."""

    def value(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return re.sub(r"\$\{(GCITE_[A-Z_]+)\}", value, template)


class Nginx:
    """nginx on ``127.0.0.1:<free port>`` balancing over ``servers`` (``host:port``)."""

    def __init__(self, servers: list[str], *, fail_timeout_s: int = 10) -> None:
        binary = nginx_binary()
        if binary is None:
            pytest.skip("nginx is not installed (Debian package nginx: `make nginx`)")
        self.binary = binary
        self.servers = servers
        self.fail_timeout_s = fail_timeout_s
        self.prefix = Path(tempfile.mkdtemp(prefix="gcite-nginx-"))
        self.prefix.chmod(0o755)  # nginx's workers run as nobody when started as root
        self.conf = self.prefix / "gcite.conf"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write(self, port: int) -> None:
        upstreams = " ".join(
            f"server {s} max_fails=1 fail_timeout={self.fail_timeout_s}s;" for s in self.servers
        )
        values = {
            "GCITE_PREFIX": str(self.prefix),
            "GCITE_LISTEN": f"127.0.0.1:{port}",
            "GCITE_UPSTREAMS": upstreams,
        }
        self.conf.write_text(render(TEMPLATE.read_text(encoding="utf-8"), values), "utf-8")

    def _command(self, *extra: str) -> list[str]:
        errors = str(self.prefix / "error.log")
        return [
            str(self.binary),
            "-p",
            str(self.prefix),
            "-c",
            str(self.conf),
            "-e",
            errors,
            *extra,
        ]

    def __enter__(self) -> Nginx:
        for _ in range(START_ATTEMPTS):  # the free port may be taken before nginx binds
            self.port = free_port()
            self._write(self.port)
            check = subprocess.run(self._command("-t"), capture_output=True, text=True, check=False)
            assert check.returncode == 0, check.stderr
            self.proc = subprocess.Popen(
                self._command("-g", "daemon off;"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if self._wait_listening():
                return self
            self.__exit__()
        raise AssertionError(f"nginx did not start: {self.error_log()}")

    def _wait_listening(self) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + 60  # a hang guard
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                httpx.get(f"{self.base}/health", timeout=5)
                return True
            except httpx.TransportError:
                time.sleep(0.1)
        return False

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # fast shutdown
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def close(self) -> None:
        """Remove the directory (after :meth:`__exit__`)."""
        shutil.rmtree(self.prefix, ignore_errors=True)

    def error_log(self) -> str:
        path = self.prefix / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def upstreams_of(self, request_id: str, timeout: float = 30.0) -> list[str]:
        """The servers nginx sent request ``request_id`` to, in order (the last answered)."""
        pattern = re.compile(r'upstream="([^"]*)".*request_id=' + re.escape(request_id) + r"\b")
        deadline = time.monotonic() + timeout
        while True:
            log = (self.prefix / "access.log").read_text(errors="replace")
            for line in log.splitlines():
                found = pattern.search(line)
                if found:
                    return [u.strip() for u in re.split(r"[,:]\s", found.group(1))]
            assert time.monotonic() < deadline, f"no nginx log line for {request_id}"
            time.sleep(0.05)


__all__ = ["TEMPLATE", "Nginx", "nginx_binary", "render"]
