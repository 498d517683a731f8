"""``gcite serve --workers N``: one knowledge process, N chat worker processes, one supervisor.

The ``gcite serve`` process supervises the set and serves nothing itself:

- **The knowledge process** (``gcite serve --knowledge-fd``, a child) owns the embedded
  store and serves, on a loopback port the supervisor bound, ``POST /retrieval`` under
  :data:`INTERNAL_PREFIX` and the Knowledge API (``/v1/datasets``), with an internal key
  generated at start-up (handed over on the child's stdin, never on a command line) that
  holds every role a configured key may grant (the union of the ``app_keys`` and
  ``retrieval_keys`` role sets) and is an admin key there. Its pid and port are printed
  at start-up.
- **N chat workers** (``gcite serve --fd``): the supervisor binds N sockets on the public
  port (SO_REUSEPORT: the kernel spreads new connections evenly among those that listen;
  each worker's server listens once the worker is ready). Each worker reaches the
  knowledge base through :class:`gcite.knowledge.access.KnowledgeAccess` with
  ``GCITE_KNOWLEDGE_URL`` / ``GCITE_KNOWLEDGE_KEY`` pointing at the knowledge process (its
  chats search it, its Knowledge API is forwarded to it), or Qdrant directly when
  ``qdrant_url`` is set, or the configured ``knowledge_url``.

Conversations live in ``db_url`` (SQLite in WAL mode, or PostgreSQL), shared by every
worker. Key roles follow the config file at each request in every process
(:class:`gcite.config.KeyTables`), the internal key's included.

The set lives and dies together: any child that exits stops the others and the
supervisor exits with status 1 and the reason on stderr (so that a supervisor of its own,
systemd ``Restart=on-failure`` or Kubernetes, restarts the whole set); Ctrl-C / SIGTERM
stops the workers, then the knowledge process; a child whose supervisor is gone (killed)
stops itself (:func:`exit_with_parent`), so a restart finds the port free.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import click

from gcite.config import Settings, every_role

INTERNAL_PREFIX = "/internal-knowledge"
"""Where the knowledge process mounts ``/retrieval`` for the workers."""


WORKER_ENV = "GCITE_WORKER_ID"
"""Set to 1..N in each chat worker's environment: what a worker keeps on disk for itself
(the offline web index, an embedded Qdrant Edge shard that one process opens) goes to a
folder of its own."""

START_GUARD_S = 300.0
"""Longest wait for the knowledge process to answer at start-up (a hang guard)."""

STOP_GRACE_S = 10.0
"""How long a stopping child may take before it is killed."""


def exit_with_parent(poll_s: float = 0.5) -> None:
    """Stop this process (SIGTERM, then exit 1 after :data:`STOP_GRACE_S`) once its parent
    is gone: a child of the supervisor never outlives it holding the port or the store."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(STOP_GRACE_S)
        os._exit(1)

    threading.Thread(target=watch, name="gcite-exit-with-parent", daemon=True).start()


def _loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.set_inheritable(True)
    return sock


def _listeners(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` sockets bound to ``host:port`` with SO_REUSEPORT (port 0: the first one
    picks a free port, the others join it), not yet listening: each worker's server starts
    listening on its own once the worker is ready, so the kernel never hands a connection
    to a worker still loading its models (it would wait in that worker's queue while
    another worker already answers)."""
    sockets: list[socket.socket] = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        port = sock.getsockname()[1]
        sock.set_inheritable(True)
        sockets.append(sock)
    return sockets


class _Children:
    """The child processes of the set, in start order, with what each one is."""

    def __init__(self) -> None:
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(
        self, what: str, command: list[str], env: dict[str, str], fd: int, given: bytes = b""
    ) -> subprocess.Popen[bytes]:
        """Start one child with ``fd`` inherited and ``given`` on its stdin."""
        proc = subprocess.Popen(command, env=env, pass_fds=(fd,), stdin=subprocess.PIPE)
        assert proc.stdin is not None
        with proc.stdin:
            proc.stdin.write(given)
        self.procs.append((what, proc))
        return proc

    def dead(self) -> tuple[str, subprocess.Popen[bytes]] | None:
        return next(((w, p) for w, p in self.procs if p.poll() is not None), None)

    def stop(self) -> None:
        """Workers first (they use the knowledge process), then the knowledge process."""
        for _what, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _start_knowledge(
    children: _Children, base: list[str], env: dict[str, str]
) -> tuple[str, str, socket.socket]:
    """Start the knowledge process on a loopback socket; wait until it answers.

    Returns ``(knowledge_url, internal_key, socket)``. Raises ClickException when it exits
    before answering."""
    import httpx

    key = secrets.token_urlsafe(32)
    sock = _loopback_socket()
    port = sock.getsockname()[1]
    command = [*base, "--knowledge-fd", str(sock.fileno())]
    proc = children.start("knowledge", command, env, sock.fileno(), key.encode() + b"\n")
    deadline = time.monotonic() + START_GUARD_S
    while True:
        if proc.poll() is not None:
            raise click.ClickException(f"知识库进程未能启动（退出码 {proc.returncode}）")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise click.ClickException("知识库进程未能启动（没有应答）")
        time.sleep(0.1)
    click.echo(
        f"知识库进程 {proc.pid}: http://127.0.0.1:{port}"
        f"（检索 {INTERNAL_PREFIX}/retrieval，知识库管理 /v1/datasets，仅限本机）"
    )
    return f"http://127.0.0.1:{port}{INTERNAL_PREFIX}", key, sock


def _death_reason(what: str, proc: subprocess.Popen[bytes]) -> str:
    if what == "knowledge":
        return f"知识库进程 {proc.pid} 意外退出（退出码 {proc.returncode}），对话服务已停止"
    return f"工作进程 {proc.pid} 意外退出（退出码 {proc.returncode}），对话服务已停止"


def run_workers(settings: Settings, workers: int, config_file: Path | None) -> None:
    """Run the knowledge process and ``workers`` chat workers until interrupted or until
    one of them exits (then ClickException: exit status 1 with the reason)."""
    env = dict(os.environ)
    base = [sys.executable, "-c", "from gcite.cli import main; main()", "serve"]
    base += ["--data-dir", str(settings.data_dir)]
    if config_file is not None:
        base += ["--config", str(config_file)]
    children = _Children()
    sockets: list[socket.socket] = []
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    died: tuple[str, subprocess.Popen[bytes]] | None = None
    try:
        if not settings.knowledge.url and not settings.knowledge.qdrant_url:
            url, key, knowledge_sock = _start_knowledge(children, base, env)
            sockets.append(knowledge_sock)
            env["GCITE_KNOWLEDGE_URL"] = url
            env["GCITE_KNOWLEDGE_KEY"] = key
        # One listening socket per worker on the same port (SO_REUSEPORT): the kernel
        # spreads new connections evenly over the workers (one shared socket lets the least
        # busy process win most accepts and leaves the others idle).
        public = _listeners(settings.service.host, settings.service.port, workers)
        sockets.extend(public)
        for number, sock in enumerate(public, start=1):
            command = [*base, "--fd", str(sock.fileno())]
            children.start("worker", command, {**env, WORKER_ENV: str(number)}, sock.fileno())
        for sock in sockets:  # the children hold them now
            sock.close()
        address = f"http://{settings.service.host}:{settings.service.port}/"
        click.echo(f"对话服务已启动: {address}  （{workers} 个工作进程）")
        while not stop.is_set() and died is None:
            died = children.dead()
            stop.wait(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        children.stop()
        for sock in sockets:
            sock.close()
    if died is not None and not stop.is_set():
        raise click.ClickException(_death_reason(*died))


__all__ = [
    "INTERNAL_PREFIX",
    "WORKER_ENV",
    "every_role",
    "exit_with_parent",
    "run_workers",
]
