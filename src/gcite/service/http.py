"""uvicorn's httptools protocol with a bound on a request's head: its size and its time.

uvicorn parses HTTP with httptools when it is installed (it is: pinned for its speed).
Unlike h11, which refuses a request line plus headers past 16 KiB, httptools takes a head
of any size, and uvicorn gives a client all the time it wants to finish one (the
keep-alive timer stops at the first byte). :class:`BoundedHttpToolsProtocol` wraps the
protocol (uvicorn's configuration has no such knobs for httptools):

* **size**: the head may take at most :data:`MAX_HEAD_BYTES`, counted two ways so the
  way the bytes arrive does not matter: the raw bytes received while the head is
  incomplete (a head growing over many reads), and the parsed request line and headers
  (a head of any size arriving in one read, where the parser completes it before the
  raw count is looked at). Past it: 400, connection closed (as h11 answers);
* **time**: the head must be complete within :data:`HEAD_TIMEOUT_S` seconds of the
  connection opening or of the previous response ending; otherwise 408 (when some of it
  arrived) and the connection is closed, so slow or silent clients cannot hold file
  descriptors.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: Bytes a request line plus headers may take (h11's limit in uvicorn, 16 KiB).
MAX_HEAD_BYTES = 16 * 1024
#: Seconds a client has to send a complete request head.
HEAD_TIMEOUT_S = 10.0

_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 24\r\nconnection: close\r\n\r\nRequest header timed out"
)


class HeadTooLarge(Exception):
    """Raised inside a parser callback: httptools turns it into a 400."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` refusing a head larger than :data:`MAX_HEAD_BYTES` or
    slower than :data:`HEAD_TIMEOUT_S` (class attributes ``max_head_bytes`` and
    ``head_timeout_s``, so a subclass can change them)."""

    max_head_bytes = MAX_HEAD_BYTES
    head_timeout_s = HEAD_TIMEOUT_S
    _in_head = True
    _head_bytes = 0  # raw bytes received while the head is incomplete
    _parsed_bytes = 0  # request line and header bytes the parser reported
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if (
            self._in_head
            and self._head_bytes > self.max_head_bytes
            and not self.transport.is_closing()
        ):
            self.send_400_response("Invalid HTTP request received.")

    def on_message_begin(self) -> None:
        self._parsed_bytes = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def _count(self, size: int) -> None:
        self._parsed_bytes += size
        if self._parsed_bytes > self.max_head_bytes:
            raise HeadTooLarge

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._disarm_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_timer()

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self._head_bytes:
            self.transport.write(_TIMEOUT_RESPONSE)
        self.transport.close()


__all__ = ["HEAD_TIMEOUT_S", "MAX_HEAD_BYTES", "BoundedHttpToolsProtocol"]
