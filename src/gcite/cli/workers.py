"""``gcite serve --workers N``: one knowledge process, N chat worker processes.

The parent process is the knowledge process: it owns the embedded store and serves
``POST /retrieval`` (and the management API) on a free 127.0.0.1 port, under
:data:`INTERNAL_PREFIX`, with an internal key generated at start-up that holds every role a
configured key may grant (the union of the ``app_keys`` and ``retrieval_keys`` role sets).
It binds N sockets on the public port (SO_REUSEPORT: the kernel spreads new connections
evenly among those that listen; each worker's server listens once the worker is ready) and
starts N ``gcite serve --fd`` children, one per socket; each opens
the knowledge base through :class:`gcite.knowledge.remote.RemoteStore` (``GCITE_KNOWLEDGE_URL`` /
``GCITE_KNOWLEDGE_KEY``), or Qdrant directly when ``qdrant_url`` is set, or the configured
``knowledge_url``. Conversations live in ``db_url`` (SQLite in WAL mode, or PostgreSQL),
shared by every worker. Key roles follow the config file at each request in every process
(:class:`gcite.config.KeyTables`), the internal key's included. Ctrl-C / SIGTERM stops the
children, then the knowledge process.
"""

from __future__ import annotations

import dataclasses
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

from gcite.config import Settings, every_role, with_internal_key

INTERNAL_PREFIX = "/internal-knowledge"
"""Where the knowledge process mounts ``/retrieval`` for the workers."""


WORKER_ENV = "GCITE_WORKER_ID"
"""Set to 1..N in each chat worker's environment: what a worker keeps on disk for itself
(the offline web index, an embedded Qdrant Edge shard that one process opens) goes to a
folder of its own."""


def start_knowledge_process(settings: Settings) -> tuple[str, str, object]:
    """Serve the store's ``/retrieval`` on a free loopback port (daemon thread).

    Returns ``(knowledge_url, internal_key, server)``; ``server.should_exit = True`` stops it.
    """
    import uvicorn

    from gcite.service import create_app
    from gcite.service.http import BoundedHttpToolsProtocol

    key = secrets.token_urlsafe(32)
    service = dataclasses.replace(settings.service, retrieval_prefix=INTERNAL_PREFIX)
    knowledge = dataclasses.replace(settings, service=service, internal_key=key)
    # The internal key's roles follow the config file: re-derived when the key tables are
    # re-read (gcite.config.KeyTables, at each request of the knowledge process).
    with_internal_key(knowledge)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(create_app(knowledge), log_level="warning", http=BoundedHttpToolsProtocol)
    )
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline:
            raise click.ClickException("知识库进程未能启动")
        time.sleep(0.02)
    return f"http://127.0.0.1:{sock.getsockname()[1]}{INTERNAL_PREFIX}", key, server


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


def run_workers(settings: Settings, workers: int, config_file: Path | None) -> None:
    """Run the knowledge process and ``workers`` chat workers until interrupted."""
    env = dict(os.environ)
    server = None
    if not settings.knowledge.url and not settings.knowledge.qdrant_url:
        url, key, server = start_knowledge_process(settings)
        env["GCITE_KNOWLEDGE_URL"] = url
        env["GCITE_KNOWLEDGE_KEY"] = key
    # One listening socket per worker on the same port (SO_REUSEPORT): the kernel spreads
    # new connections evenly over the workers (one shared socket lets the least busy
    # process win most accepts and leaves the others idle).
    sockets = _listeners(settings.service.host, settings.service.port, workers)
    base = [sys.executable, "-c", "from gcite.cli import main; main()", "serve"]
    base += ["--data-dir", str(settings.data_dir)]
    if config_file is not None:
        base += ["--config", str(config_file)]
    children = [
        subprocess.Popen(
            [*base, "--fd", str(s.fileno())],
            env={**env, WORKER_ENV: str(number)},
            pass_fds=(s.fileno(),),
        )
        for number, s in enumerate(sockets, start=1)
    ]
    service = settings.service
    click.echo(f"对话服务已启动: http://{service.host}:{service.port}/  （{workers} 个工作进程）")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    died: subprocess.Popen[bytes] | None = None
    try:
        while not stop.is_set() and died is None:
            died = next((c for c in children if c.poll() is not None), None)
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        for sock in sockets:
            sock.close()
        if server is not None:
            server.should_exit = True  # type: ignore[attr-defined]
    if died is not None and not stop.is_set():
        # a worker that dies takes the service down with a failure status, so that a
        # supervisor (systemd Restart=on-failure, Kubernetes) restarts the whole set
        raise click.ClickException(
            f"工作进程 {died.pid} 意外退出（退出码 {died.returncode}），对话服务已停止"
        )


__all__ = [
    "INTERNAL_PREFIX",
    "WORKER_ENV",
    "every_role",
    "run_workers",
    "start_knowledge_process",
]
