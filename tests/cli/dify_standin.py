"""A real loopback HTTP server speaking Dify's Service API streaming protocol, scripted.

It stands in for a remote Dify deployment (outside our control) in the ``gcite ask --url``
tests: ``POST /v1/chat-messages`` answers with the scripted SSE body, cut into the
scripted pieces (so UTF-8 sequences and markers are split across TCP writes), or with a
Dify error body ``{code, message, status}``, or breaks the connection after the pieces.
Requests (headers and JSON body) are recorded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def frame(obj: dict[str, Any]) -> bytes:
    """One ``data: <json>`` SSE frame."""
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def dify_answer(
    deltas: list[str], chunk_metadata: list[dict[str, Any]] | None, *, end: bool = True
) -> bytes:
    """A chatflow stream: workflow_started, node_finished(code), message deltas, message_end."""
    env = {"conversation_id": "conv-1", "message_id": "msg-1", "task_id": "task-1"}
    out = frame({"event": "workflow_started", **env, "data": {"id": "run-1"}})
    out += b"event: ping\n\n"
    if chunk_metadata is not None:
        outputs = {"chunk_metadata": chunk_metadata, "chunk_count": len(chunk_metadata)}
        data = {"node_type": "code", "title": "Chunk编号", "outputs": outputs}
        out += frame({"event": "node_finished", **env, "data": data})
    for delta in deltas:
        out += frame({"event": "message", **env, "id": "msg-1", "answer": delta})
    if end:
        meta = {"usage": {"total_tokens": 3}, "retriever_resources": []}
        out += frame({"event": "message_end", **env, "id": "msg-1", "metadata": meta})
    return out


@dataclass
class Reply:
    """What to answer: ``body`` cut into ``pieces`` writes; ``status`` != 200 sends ``body``
    as JSON; ``break_after`` closes the socket without finishing the chunked body;
    ``hang_until`` keeps the stream open (pings) until the event is set."""

    body: bytes = b""
    status: int = 200
    content_type: str = "text/event-stream"
    piece: int = 7
    break_after: bool = False
    #: Set: after the body, keep the stream open with a ``ping`` frame every 50 ms until
    #: the event is set (a service that hangs mid-stream yet keeps the connection alive).
    hang_until: threading.Event | None = None


@dataclass
class DifyStandin:
    """The running server: ``url`` (service root), ``replies`` queue, recorded ``requests``."""

    url: str
    replies: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def dify_standin() -> Iterator[DifyStandin]:
    """Serve on 127.0.0.1 (free port) in a thread until the block ends."""
    state = DifyStandin(url="", replies=[])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            state.requests.append(
                {"path": self.path, "headers": dict(self.headers), "json": json.loads(raw or b"{}")}
            )
            reply = state.replies.pop(0) if state.replies else Reply(status=500, body=b"{}")
            self.send_response(reply.status)
            self.send_header("content-type", reply.content_type)
            if reply.status != 200:
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
                return
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            body = reply.body
            for i in range(0, len(body), reply.piece):
                piece = body[i : i + reply.piece]
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            while reply.hang_until is not None and not reply.hang_until.wait(0.05):
                ping = b"event: ping\n\n"
                try:
                    self.wfile.write(f"{len(ping):x}\r\n".encode() + ping + b"\r\n")
                    self.wfile.flush()
                except OSError:
                    return
            if reply.break_after:
                self.close_connection = True
                return
            self.wfile.write(b"0\r\n\r\n")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
