"""uvicorn's httptools protocol with a bound on a request's head.

uvicorn parses HTTP with httptools when it is installed (it is: pinned for its speed).
Unlike h11, which uvicorn used before and which refuses a request line plus headers past
16 KiB, httptools takes a head of any size: one unauthenticated request with a huge
header kept a worker busy and its memory growing.
:class:`BoundedHttpToolsProtocol` answers such a request as h11 did (400, connection
closed) once more than :data:`MAX_HEAD_BYTES` arrived without the head being complete.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: Bytes a request line plus headers may take (h11's limit in uvicorn, 16 KiB).
MAX_HEAD_BYTES = 16 * 1024


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` refusing a head larger than :data:`MAX_HEAD_BYTES`."""

    _in_head = True
    _head_bytes = 0

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self.send_400_response("Invalid HTTP request received.")

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True


__all__ = ["MAX_HEAD_BYTES", "BoundedHttpToolsProtocol"]
