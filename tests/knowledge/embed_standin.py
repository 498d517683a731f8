"""A real HTTP server on 127.0.0.1 speaking the OpenAI embeddings protocol.

``POST /v1/embeddings {"model", "input": [str, ...]}`` answers
``{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...]}], "model"}``.
Vectors are 64-dim hashed character-bigram counts (deterministic, so similar
texts get similar vectors). ``mode`` switches to failure behaviour: ``"500"``,
``"garbage"`` (not JSON), ``"short"`` (one vector too few), ``"slow"`` (sleeps).
``gate``: an event every request waits for (a hang guard bounds the wait): clear it to
hold the embedding calls, so a write stays ``indexing`` until the test sets it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIM = 64


def vector(text: str) -> list[float]:
    """Hashed character-bigram counts."""
    out = [0.0] * DIM
    for a, b in itertools.pairwise(text):
        bucket = hashlib.blake2b((a + b).encode(), digest_size=2).digest()
        out[int.from_bytes(bucket, "big") % DIM] += 1.0
    if not any(out):
        out[0] = 1.0
    return out


class EmbeddingStandin:
    """Start with ``with EmbeddingStandin() as s: s.base_url``; set ``s.mode`` to fail."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.gate = threading.Event()
        self.gate.set()
        self.requests: list[dict[str, Any]] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                standin.requests.append(body)
                if self.path != "/v1/embeddings":
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                standin.gate.wait(120)
                mode = standin.mode
                if mode == "500":
                    self._send(500, b'{"error": {"message": "upstream exploded"}}')
                    return
                if mode == "garbage":
                    self._send(200, b"<html>not json</html>")
                    return
                if mode == "slow":
                    time.sleep(2)
                inputs = body.get("input", [])
                inputs = [inputs] if isinstance(inputs, str) else inputs
                if mode == "short":
                    inputs = inputs[:-1]
                data = [
                    {"object": "embedding", "index": i, "embedding": vector(t)}
                    for i, t in enumerate(inputs)
                ]
                payload = {"object": "list", "data": data, "model": body.get("model")}
                self._send(200, json.dumps(payload).encode())

            def _send(self, status: int, raw: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> EmbeddingStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
