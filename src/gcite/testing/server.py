"""Real servers for tests: a free loopback port, and an ASGI app under uvicorn in a thread.

:func:`live_service` is the one way a test serves an app (a gcite service, a page app)
on 127.0.0.1; :func:`free_port` the one way it picks a port for a server it starts
elsewhere (``gcite serve`` in a subprocess, PostgreSQL), and :func:`busy_port` the one way
it holds a port taken. None of them imports pytest.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    """A TCP port on ``host`` that was free a moment ago (the OS picks it).

    For a server started in another process: the port is released before this returns,
    so another process may take it first. :func:`live_service` binds its socket itself
    and has no such window.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextmanager
def busy_port(host: str = HOST) -> Iterator[int]:
    """A port on ``host`` held by a listening socket until the block ends (nothing accepts:
    for tests of what a server does when its port is taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@contextmanager
def live_service(
    app: Any,
    *,
    host: str = HOST,
    lifespan: Literal["auto", "on", "off"] = "on",
    startup_timeout_s: float = 120.0,
    state: dict[str, Any] | None = None,
) -> Iterator[str]:
    """Serve the ASGI ``app`` with uvicorn in a daemon thread; yields its base URL.

    The socket is bound to a free port on ``host`` before uvicorn starts, so the URL
    (``http://127.0.0.1:<port>``, no trailing slash) is final. ``lifespan``: uvicorn's
    setting (``"on"`` runs the app's start-up and shut-down). Raises :class:`RuntimeError`
    when the server stops or has not started within ``startup_timeout_s`` seconds (a
    hang guard, not a speed limit). On exit the server is asked to stop and the thread
    joined (at most ten seconds). ``state``: a dict filled, once the app has started, with
    its lifespan state (what its lifespan yielded, e.g. objects a test reads counters of).
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(app, log_level="warning", lifespan=lifespan)
    server = uvicorn.Server(config)
    exits: list[SystemExit] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except SystemExit as exc:  # uvicorn's answer to a failed start-up
            exits.append(exc)

    thread = threading.Thread(target=run, name=f"live-service-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    try:
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                status = f" (exit status {exits[0].code})" if exits else ""
                raise RuntimeError(f"uvicorn did not start on {host}:{port}{status}")
            time.sleep(0.02)
        started = getattr(server.lifespan, "state", {})
        warming = started.get("warming")
        if warming is not None:  # as gcite.service.server does once it listens
            warming.start_threadsafe()
        if state is not None:
            state.update(started)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


__all__ = ["busy_port", "free_port", "live_service"]
