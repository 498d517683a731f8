"""``gcite serve --workers N``: N chat worker processes under one supervisor (and, for an
embedded store, one knowledge process).

The ``gcite serve`` process supervises the set and serves nothing itself:

- **The knowledge process** (``gcite serve --knowledge-fd``, a child), only when the
  knowledge base is an embedded Qdrant Edge shard (one process may open it,
  :func:`needs_knowledge_process`): it owns the store and serves, on a loopback port the
  supervisor bound, ``POST /retrieval`` under :data:`INTERNAL_PREFIX` and the Knowledge
  API (``/v1/datasets``), with an internal key generated at start-up (handed over on the
  child's stdin, never on a command line) that holds every role a configured key may
  grant (the union of the ``app_keys`` and ``retrieval_keys`` role sets) and is an admin
  key there. It answers no chat (:func:`gcite.cli.serve.knowledge_app`): it builds no web
  source and its warm-up loads only the store's search, not the verifier nor the answering
  backend the workers warm. Its pid and port are printed at start-up. The workers reach it through
  :class:`gcite.knowledge.access.KnowledgeAccess` with ``GCITE_KNOWLEDGE_URL`` /
  ``GCITE_KNOWLEDGE_KEY``. With ``store = "pgvector"``, ``qdrant_url`` or
  ``knowledge_url`` there is none: every worker opens the knowledge base itself (the same
  factory), so the workers are stateless and any number of ``gcite serve`` processes on
  any number of machines serve the same data.
- **N chat workers** (``gcite serve --fd --ready-fd``): the supervisor binds one socket
  per worker on the public port (SO_REUSEPORT: the kernel spreads new connections evenly
  among those that listen; each worker's server listens once the worker is ready, and
  then writes ``ready`` on its ready pipe).

Conversations live in ``db_url`` (SQLite in WAL mode, or PostgreSQL), shared by every
worker. Key roles follow the config file at each request in every process
(:class:`gcite.config.KeyTables`), the internal key's included.

A worker that exits after it was ready (killed, crashed) is replaced on the same socket
while the others go on serving; its messages still ``running`` are marked failed by the
new worker's start-up (:mod:`gcite.service.instances`). The supervisor keeps every
worker's listening socket open for the life of the set and hands a replacement the very
socket its predecessor listened on: a listening socket lives as long as one process holds
it, so the connections the kernel had queued on it (accepted by the kernel, not yet by the
dead worker) stay queued and are answered by the replacement once it listens, none is
reset. Until then the kernel goes on routing a share of the new connections to that
socket, where they wait for the replacement's start-up instead of being answered by the
other workers at once: Linux cannot take one socket out of an SO_REUSEPORT group and keep
its queue (closing it resets the queue; moving the queue to the group's other sockets
needs the system-wide ``net.ipv4.tcp_migrate_req`` sysctl, off by default, or a BPF
steering program), and the supervisor accepting them itself would need a way to hand a
connection to a running uvicorn worker, which uvicorn has not. A wait of one start-up is
the price of losing no connection. A worker that exits before it was ready (a start-up
failure another would repeat) and the knowledge process exiting (the single owner of the
store) stop the set: the supervisor stops the others and exits with status 1 and the
reason on stderr (so that a supervisor of its own, systemd ``Restart=on-failure`` or
Kubernetes, restarts the whole set). Ctrl-C / SIGTERM first closes the supervisor's copies
of the sockets (so a worker that stops listening is no longer reached through the port),
then stops the workers (each ends its answers in flight, :mod:`gcite.service.server`),
then the knowledge process; a child whose supervisor is gone (killed: the kernel closes
the supervisor's sockets) stops itself (:func:`exit_with_parent`), so a restart finds the
port free.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
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
    another worker already answers). A replacement worker gets its predecessor's socket,
    still listening (module docstring)."""
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
        self,
        what: str,
        command: list[str],
        env: dict[str, str],
        fds: tuple[int, ...],
        given: bytes = b"",
    ) -> subprocess.Popen[bytes]:
        """Start one child with ``fds`` inherited and ``given`` on its stdin."""
        proc = subprocess.Popen(command, env=env, pass_fds=fds, stdin=subprocess.PIPE)
        assert proc.stdin is not None
        with proc.stdin:
            proc.stdin.write(given)
        self.procs.append((what, proc))
        return proc

    def forget(self, proc: subprocess.Popen[bytes]) -> None:
        """Drop a child that exited (it was reaped)."""
        self.procs = [(w, p) for w, p in self.procs if p is not proc]

    def dead(self) -> tuple[str, subprocess.Popen[bytes]] | None:
        return next(((w, p) for w, p in self.procs if p.poll() is not None), None)

    def stop(self) -> None:
        """The workers all at once (each ends its answers in flight), then the knowledge
        process (the workers use it until they exit); a child still running
        :data:`STOP_GRACE_S` after its SIGTERM is killed."""
        workers = [proc for what, proc in self.procs if what != "knowledge"]
        knowledge = [proc for what, proc in self.procs if what == "knowledge"]
        for group in (workers, knowledge):
            for proc in group:
                if proc.poll() is None:
                    proc.terminate()
            deadline = time.monotonic() + STOP_GRACE_S
            for proc in group:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def ready_notice(fd: int | None) -> Callable[[], None] | None:
    """What a chat worker calls once it serves: one line on its ``--ready-fd`` pipe."""
    if fd is None:
        return None

    def notify() -> None:
        try:
            os.write(fd, b"ready\n")
            os.close(fd)
        except OSError:  # the supervisor is gone: exit_with_parent stops this process
            pass

    return notify


class _Slot:
    """One chat worker: its number, process and ready pipe (read end)."""

    def __init__(self, number: int, proc: subprocess.Popen[bytes], ready_fd: int) -> None:
        self.number = number
        self.proc = proc
        self.ready_fd = ready_fd
        self.ready = False

    def poll_ready(self) -> bool:
        """True once the worker said it serves (non-blocking read of the pipe)."""
        if not self.ready:
            with contextlib.suppress(BlockingIOError):
                self.ready = self.ready_fd >= 0 and os.read(self.ready_fd, 64).startswith(b"ready")
        return self.ready

    def close(self) -> None:
        """Close the pipe (once)."""
        if self.ready_fd >= 0:
            os.close(self.ready_fd)
            self.ready_fd = -1


class _Workers:
    """The chat workers on ``host:port``: each worker number has its own SO_REUSEPORT
    socket, which the supervisor holds until :meth:`close`; a worker that exits after it
    was ready is replaced on the same socket (the connections queued on it wait there for
    the replacement; the other workers go on serving)."""

    def __init__(
        self, children: _Children, base: list[str], env: dict[str, str], host: str, port: int
    ) -> None:
        self.children = children
        self.base = base
        self.env = env
        self.host = host
        self.port = port
        self.slots: list[_Slot] = []
        self.sockets: dict[int, socket.socket] = {}

    def start(self, number: int) -> _Slot:
        """Start worker ``number`` (1..N) on that number's socket (bound on first use)."""
        sock = self.sockets.get(number)
        if sock is None:
            (sock,) = _listeners(self.host, self.port, 1)
            self.port = sock.getsockname()[1]
            self.sockets[number] = sock
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        command = [*self.base, "--fd", str(sock.fileno()), "--ready-fd", str(write_fd)]
        env = {**self.env, WORKER_ENV: str(number)}
        try:
            proc = self.children.start("worker", command, env, (sock.fileno(), write_fd))
        finally:
            os.close(write_fd)  # the socket stays open here: a replacement gets it too
        slot = _Slot(number, proc, read_fd)
        self.slots = [s for s in self.slots if s.number != number] + [slot]
        return slot

    def check(self) -> str | None:
        """Replace the workers that exited; the reason to stop the set when one exited
        before it was ever ready (a start-up failure: another would fail alike)."""
        for slot in list(self.slots):
            slot.poll_ready()
            code = slot.proc.poll()
            if code is None:
                continue
            self.children.forget(slot.proc)
            slot.close()
            if not slot.ready:
                return f"工作进程 {slot.proc.pid} 启动失败（退出码 {code}），对话服务已停止"
            try:
                new = self.start(slot.number)
            except OSError as exc:  # the port or a pipe could not be had again
                return f"无法启动新的工作进程替换 {slot.proc.pid}（{exc}），对话服务已停止"
            old = f"工作进程 {slot.proc.pid} 意外退出（退出码 {code}）"
            click.echo(f"{old}，已启动新的工作进程 {new.proc.pid}", err=True)
        return None

    def close(self) -> None:
        """Close the sockets (a worker still running keeps its own copy) and the pipes."""
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()
        for slot in self.slots:
            slot.close()


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
    proc = children.start("knowledge", command, env, (sock.fileno(),), key.encode() + b"\n")
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


def needs_knowledge_process(settings: Settings) -> bool:
    """True when the knowledge base is an embedded Qdrant Edge shard (one process may
    open it); with pgvector, ``qdrant_url`` or ``knowledge_url`` every worker opens the
    knowledge base itself."""
    knowledge = settings.knowledge
    return not (knowledge.url or knowledge.qdrant_url or knowledge.store == "pgvector")


def _supervise(
    stop: threading.Event, workers: _Workers, knowledge: subprocess.Popen[bytes] | None
) -> str | None:
    """Until ``stop`` (SIGTERM) or Ctrl-C (None) or a reason to stop the set."""
    try:
        while not stop.is_set():
            if knowledge is not None and knowledge.poll() is not None:
                return (
                    f"知识库进程 {knowledge.pid} 意外退出（退出码 {knowledge.returncode}），"
                    "对话服务已停止"
                )
            reason = workers.check()
            if reason is not None:
                return reason
            stop.wait(0.2)
    except KeyboardInterrupt:
        pass
    return None


def run_workers(settings: Settings, workers: int, config_file: Path | None) -> None:
    """Run ``workers`` chat workers (and, for an embedded Qdrant Edge store, the
    knowledge process) until interrupted; a worker that exits is replaced, the knowledge
    process exiting or a worker failing to start stops the set (ClickException: exit
    status 1 with the reason)."""
    env = dict(os.environ)
    base = [sys.executable, "-c", "from gcite.cli import main; main()", "serve"]
    base += ["--data-dir", str(settings.data_dir)]
    if config_file is not None:
        base += ["--config", str(config_file)]
    children = _Children()
    service = settings.service
    slots = _Workers(children, base, env, service.host, service.port)
    knowledge: subprocess.Popen[bytes] | None = None
    reason: str | None = None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        if needs_knowledge_process(settings):
            url, key, knowledge_sock = _start_knowledge(children, base, env)
            knowledge_sock.close()  # the knowledge process holds it now
            knowledge = children.procs[0][1]
            env["GCITE_KNOWLEDGE_URL"] = url
            env["GCITE_KNOWLEDGE_KEY"] = key
        # One listening socket per worker on the same port (SO_REUSEPORT): the kernel
        # spreads new connections evenly over the workers (one shared socket lets the least
        # busy process win most accepts and leaves the others idle).
        for number in range(1, workers + 1):
            slots.start(number)
        address = f"http://{service.host}:{service.port}/"
        click.echo(f"对话服务已启动: {address}  （{workers} 个工作进程）")
        reason = _supervise(stop, slots, knowledge)
    except KeyboardInterrupt:
        pass
    finally:
        slots.close()  # first: a worker that stops listening is then no longer reached
        children.stop()
    if reason is not None:
        raise click.ClickException(reason)


__all__ = [
    "INTERNAL_PREFIX",
    "WORKER_ENV",
    "every_role",
    "exit_with_parent",
    "needs_knowledge_process",
    "ready_notice",
    "run_workers",
]
