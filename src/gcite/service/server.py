"""The uvicorn server every ``gcite serve`` process runs: a ready notice, answers ended on exit.

:func:`serve_app` runs the app on ``host:port`` or on an inherited socket ``fd`` (the
chat workers and the knowledge process of ``gcite serve --workers N``) with the bounded
HTTP protocol (:class:`gcite.service.http.BoundedHttpToolsProtocol`), and adds two things
to uvicorn's own server:

- The app's start-up warm-up is scheduled once the server listens: it begins after the
  first ``/ready`` answer, or a question, or shortly after (:mod:`gcite.service.warmup`).
- ``on_ready()`` is called once the app's start-up ran and the server listens (a worker
  tells its supervisor so; a worker that exits before it is ready is a start-up failure,
  not a crash to repair by starting another).
- On SIGTERM / SIGINT the server first says it is draining (``/ready`` 503; a proxied
  request still arriving on an open connection is answered 503 before anything runs, so
  nginx sends it to another machine: :mod:`gcite.service.readiness`), stops listening,
  then gives the answers in flight up to :data:`DRAIN_S` seconds to end on their own,
  then ends the rest as failed with an ``error`` event
  (:meth:`gcite.service.runs.RunRegistry.interrupt_all`), so a client learns that its
  answer broke off and the stored message says ``failed``; only then does uvicorn close
  the connections and run the app's shutdown. A process killed with ``SIGKILL`` can send
  nothing: its messages are marked failed by the next process that starts on the same
  database (:mod:`gcite.service.instances`).
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI

from gcite.service.http import BoundedHttpToolsProtocol
from gcite.service.readiness import Readiness
from gcite.service.runs import RunRegistry
from gcite.service.warmup import listening

DRAIN_S = 5.0
"""How long (s) a stopping server lets its answers in flight run before ending them (kept
below the ``gcite serve --workers`` supervisor's grace, after which it kills a child)."""


class GciteServer(uvicorn.Server):
    """uvicorn's server with the ready notice and the interrupting shutdown (module docs);
    ``drain_s``: how long the answers in flight may run on once it stops (s)."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_ready: Callable[[], None] | None = None,
        *,
        drain_s: float = DRAIN_S,
    ) -> None:
        super().__init__(config)
        self.on_ready = on_ready
        self.drain_s = drain_s

    def runs(self) -> RunRegistry | None:
        """The app's run registry: its lifespan state ``runs`` (gcite.service.app)."""
        state = getattr(getattr(self, "lifespan", None), "state", None) or {}
        runs = state.get("runs")
        return runs if isinstance(runs, RunRegistry) else None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            listening(getattr(getattr(self, "lifespan", None), "state", None))
        if self.started and self.on_ready is not None:
            self.on_ready()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        state = getattr(getattr(self, "lifespan", None), "state", None) or {}
        readiness = state.get("readiness")
        if isinstance(readiness, Readiness):  # requests still arriving go to other machines
            readiness.drain()
        for server in self.servers:  # no new connections while the answers end
            server.close()
        runs = self.runs()
        if runs is not None:
            await runs.interrupt_all(self.drain_s)
        await super().shutdown(sockets)


def serve_app(
    app: FastAPI,
    *,
    fd: int | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve ``app`` (made by :func:`gcite.service.create_app`: its lifespan state holds
    the run registry, ``runs``) until SIGTERM / SIGINT; blocking."""
    if fd is not None:
        config = uvicorn.Config(app, fd=fd, log_level="warning", http=BoundedHttpToolsProtocol)
    else:
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", http=BoundedHttpToolsProtocol
        )
    GciteServer(config, on_ready).run()


__all__ = ["DRAIN_S", "GciteServer", "serve_app"]
