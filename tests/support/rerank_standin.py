"""A real HTTP server on 127.0.0.1 speaking the rerank protocol of Jina / Cohere / Xinference.

``POST /v1/rerank {"model", "query", "documents": [str], "top_n", "return_documents"}``
answers ``{"id", "model", "results": [{"index": i, "relevance_score": s}], "usage"}``,
best first, at most ``top_n`` results (Jina's and Cohere's v1 shape; Xinference adds
``meta``, which clients ignore). The score is the share of the query's characters found in
the document (deterministic). ``mode``: ``"ok"``, ``"500"``, ``"garbage"`` (not JSON),
``"bad-index"`` (an index out of range), ``"slow"`` (sleeps 2 s), ``"reverse"`` (the
worst document first with the highest score: makes a reorder visible). Requests are
recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def score(query: str, document: str) -> float:
    """Share of the distinct query characters present in ``document``."""
    chars = {c for c in query if not c.isspace()}
    return sum(c in document for c in chars) / len(chars) if chars else 0.0


class RerankStandin:
    """Run with ``with RerankStandin() as server: server.url``."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                standin.requests.append(body)
                standin.headers.append(dict(self.headers))
                if self.path != "/v1/rerank":
                    return self._send(404, b'{"detail":"Not Found"}')
                mode = standin.mode
                if mode == "500":
                    return self._send(500, b'{"detail":"model crashed"}')
                if mode == "garbage":
                    return self._send(200, b"<html>oops</html>")
                if mode == "slow":
                    time.sleep(2.0)
                docs = [str(d) for d in body.get("documents", [])]
                ranked = sorted(
                    ((i, score(str(body.get("query", "")), d)) for i, d in enumerate(docs)),
                    key=lambda pair: -pair[1],
                )
                if mode == "reverse":
                    ranked = [(i, 1.0 - n * 0.01) for n, (i, _) in enumerate(reversed(ranked))]
                if mode == "bad-index":
                    ranked = [(len(docs) + 5, 0.9)]
                top = ranked[: int(body.get("top_n") or len(docs))]
                answer = {
                    "id": "rerank-standin",
                    "model": body.get("model", ""),
                    "results": [{"index": i, "relevance_score": s} for i, s in top],
                    "usage": {"total_tokens": sum(len(d) for d in docs)},
                }
                return self._send(200, json.dumps(answer).encode())

            def _send(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1/rerank"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> RerankStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
