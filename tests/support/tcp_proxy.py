"""A TCP forwarder for tests: one machine's network path to a server, which the test cuts.

:class:`TcpProxy` listens on a free loopback port and forwards every connection to
``target`` (``host, port``), one thread pair per connection. :meth:`TcpProxy.cut` closes
the listening socket and every forwarded connection (new connections are refused, open
ones reset: as a machine that lost its route to the server sees it); :meth:`restore`
listens again on the same port.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from gcite.testing import free_port


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``target`` (module docstring)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None

    def __enter__(self) -> TcpProxy:
        self.restore()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()

    def restore(self) -> None:
        """Listen (again) on :attr:`port`."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and reset the open ones."""
        listener, self._listener = self._listener, None
        with self._lock:
            opened, self._sockets = self._sockets, []
        for sock in [s for s in (listener,) if s is not None] + opened:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


__all__ = ["TcpProxy"]
