"""A real local HTTP server speaking OpenAI's chat-completions streaming protocol.

It stands in for an LLM API (something outside our control) in tests, browser
tests and benchmarks. It listens on 127.0.0.1 (free port), runs its own event
loop in a daemon thread, and answers ``POST /v1/chat/completions``:

- ``stream: true`` -> ``text/event-stream`` with one ``data: {chat.completion.chunk}``
  frame per scripted delta, a final chunk with ``finish_reason: "stop"``, a usage
  chunk when ``stream_options.include_usage`` is set, then ``data: [DONE]``
  (the wire format of the OpenAI API reference, "Streaming").
- ``stream: false`` -> one ``chat.completion`` JSON object.

Reasoning models are covered as their APIs send them: ``reasoning`` deltas stream
before the content in a separate delta field — ``reasoning_content`` (DeepSeek-R1,
Qwen3 on DashScope, vLLM before the rename) or ``reasoning`` (vLLM now, Ollama) — with
``content`` ``null`` (DeepSeek) or ``""`` (Ollama) beside it. ``ascii_json`` sends the
chunks with ASCII JSON escapes (as Python's ``json.dumps`` default does), so a delta
holding half of a surrogate pair arrives as a lone ``"\\ud83d"`` escape, exactly the
broken Unicode a provider produces when it cuts a character between two chunks.

Every request is answered by a :class:`Script`: the next one queued with
:meth:`OpenAIStandin.push`, else the result of the ``responder`` callable (given the
request body), else the default script. A script can delay the first token and
every token, drop the connection after N deltas, hang forever, or answer with an
HTTP error in OpenAI's error shape.

The server records every request body (``requests``) and counts connections that
the *client* closed before the answer was complete (``client_disconnects``), so a
test can verify that cancelling a generation really closed the upstream call.

Run it by hand (e.g. for the browser demo or a benchmark)::

    python tests/support/openai_standin.py --port 9100 --delay 0.02 \
        --answer "巡更人员需要先登录[C:1]。"
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SPLIT_DELTAS", "SPLIT_SHOWN", "OpenAIStandin", "Script", "split_text"]

#: Deltas that cut ``[C:N]`` markers and a surrogate pair (U+1F600 as two lone JSON
#: escapes with ``Script(ascii_json=True)``) across chunks, as real providers do.
SPLIT_DELTAS = [
    "钥匙",
    "在三号",
    "保险柜[",
    "C",
    ":1",
    "]，",
    "\ud83d",
    "\ude00",
    "须两人",
    "在场[C:",
    "1]。",
]
#: The text of :data:`SPLIT_DELTAS` once joined (markers stay in the raw stream).
SPLIT_SHOWN = "钥匙在三号保险柜[C:1]，😀须两人在场[C:1]。"


def split_text(text: str, size: int = 4) -> list[str]:
    """Cut ``text`` into deltas of ``size`` characters (the last one may be shorter)."""
    if size < 1:
        raise ValueError("size must be >= 1")
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


@dataclass
class Script:
    """What the stand-in answers to one request.

    ``deltas``: the content deltas, in order. ``first_token_delay_s`` / ``token_delay_s``:
    seconds before the first delta and between deltas. ``drop_after``: after that many
    deltas the TCP connection is aborted (no final chunk, no ``[DONE]``). ``hang``: the
    response headers are sent, then nothing ever again (until the client goes away).
    ``status``: answer with this HTTP error status and ``error`` (OpenAI error object)
    instead of a completion. ``usage``: (prompt_tokens, completion_tokens); by default
    prompt tokens = characters of all messages // 2, completion tokens = number of deltas.
    ``raw``: SSE frames sent verbatim instead (e.g. a malformed chunk), then the stream ends.
    ``trickle``: after the deltas, this frame (e.g. a ``: keep-alive`` comment or an empty
    delta) is sent every ``trickle_interval_s`` seconds, forever, until the client leaves.
    ``endless_line``: after the deltas, one ``data:`` line that never ends (64 KiB pieces,
    no newline) until the client leaves.
    ``reasoning``: reasoning deltas sent before ``deltas`` in the delta field
    ``reasoning_field`` (``"reasoning_content"`` or ``"reasoning"``), with ``content`` set
    to ``reasoning_placeholder`` (``None``: JSON ``null``, as DeepSeek; ``""``, as Ollama).
    ``ascii_json``: encode chunks with ASCII escapes (always done for lone surrogates).
    ``gate``: the deltas after the first wait until it is set (or the client leaves), so
    a test decides when the answer goes on, whatever the machine's speed.
    """

    deltas: list[str] = field(default_factory=lambda: ["你好", "。"])
    first_token_delay_s: float = 0.0
    token_delay_s: float = 0.0
    drop_after: int | None = None
    hang: bool = False
    status: int | None = None
    error: dict[str, Any] | None = None
    usage: tuple[int, int] | None = None
    raw: list[bytes] | None = None
    trickle: bytes | None = None
    trickle_interval_s: float = 0.05
    endless_line: bool = False
    reasoning: list[str] = field(default_factory=list)
    reasoning_field: str = "reasoning_content"
    reasoning_placeholder: str | None = None
    ascii_json: bool = False
    gate: threading.Event | None = None

    @classmethod
    def text(cls, answer: str, *, size: int = 4, **kwargs: Any) -> Script:
        """A script streaming ``answer`` in deltas of ``size`` characters."""
        return cls(deltas=split_text(answer, size), **kwargs)


Responder = Callable[[dict[str, Any]], Script | None]


class OpenAIStandin:
    """The stand-in server. Use as a context manager, or call :meth:`start` / :meth:`stop`.

    ``base_url`` is ``http://127.0.0.1:<port>/v1`` (what the ``openai`` SDK expects).
    """

    def __init__(
        self,
        default: Script | None = None,
        *,
        responder: Responder | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.default = default or Script()
        self.responder = responder
        self.host = host
        self.port = port
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.client_disconnects = 0
        self.completed = 0
        self._queue: deque[Script] = deque()
        self._lock = threading.Lock()
        self._disconnected = threading.Condition(self._lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    # ----------------------------------------------------------------- control
    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL of this server (``.../v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def push(self, *scripts: Script) -> None:
        """Queue scripts for the next requests (first in, first out)."""
        with self._lock:
            self._queue.extend(scripts)

    def reset(self) -> None:
        """Forget queued scripts, recorded requests and counters."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.request_headers.clear()
            self.client_disconnects = 0
            self.completed = 0

    def wait_for_disconnect(self, count: int = 1, timeout: float = 120.0) -> bool:
        """Block until at least ``count`` client disconnects were seen; False after
        ``timeout`` seconds (a hang guard: callers assert it is True)."""
        deadline = time.monotonic() + timeout
        with self._disconnected:
            while self.client_disconnects < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._disconnected.wait(remaining)
            return True

    def start(self) -> OpenAIStandin:
        """Start serving in a daemon thread; returns self once the port is bound."""
        self._thread = threading.Thread(target=self._run, name="openai-standin", daemon=True)
        self._thread.start()
        self._ready.wait(120)  # a hang guard
        if self._startup_error is not None:
            raise RuntimeError("stand-in failed to start") from self._startup_error
        return self

    def stop(self) -> None:
        """Stop the server and its thread."""
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(self._shutdown)
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> OpenAIStandin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- server
    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, self.host, self.port, backlog=1024)
            )
            sock = self._server.sockets[0]
            self.port = int(sock.getsockname()[1])
        except BaseException as exc:
            self._startup_error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _shutdown(self) -> None:
        assert self._loop is not None
        if self._server is not None:
            self._server.close()
        for task in asyncio.all_tasks(self._loop):
            task.cancel()
        self._loop.call_later(0.05, self._loop.stop)

    def _next_script(self, body: dict[str, Any]) -> Script:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            script = self.responder(body)
            if script is not None:
                return script
        return self.default

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                keep = await self._handle_one(reader, writer)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = [*lines[0].split(" ", 2), "", ""][:3]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        raw = await reader.readexactly(length) if length else b""
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            await self._send_json(writer, 404, {"error": _err("Not found", "not_found")})
            return True
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body must be an object")
        except ValueError as exc:
            await self._send_json(writer, 400, {"error": _err(str(exc), "invalid_request_error")})
            return True
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)
        script = self._next_script(body)
        if script.status is not None:
            error = script.error or _err(f"stand-in error {script.status}", "server_error")
            await self._send_json(writer, script.status, {"error": error})
            return True
        if body.get("stream"):
            return await self._stream(reader, writer, body, script)
        await self._complete(writer, body, script)
        return True

    async def _send_json(self, writer: asyncio.StreamWriter, status: int, obj: Any) -> None:
        data = json.dumps(obj, ensure_ascii=False).encode()
        writer.write(
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    def _usage(self, body: dict[str, Any], script: Script) -> dict[str, int]:
        if script.usage is not None:
            prompt, completion = script.usage
        else:
            chars = sum(len(str(m.get("content", ""))) for m in body.get("messages") or [])
            prompt, completion = chars // 2, len(script.deltas) + len(script.reasoning)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    async def _complete(
        self, writer: asyncio.StreamWriter, body: dict[str, Any], script: Script
    ) -> None:
        await asyncio.sleep(script.first_token_delay_s)
        obj = {
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "standin",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(script.deltas)},
                    "finish_reason": "stop",
                }
            ],
            "usage": self._usage(body, script),
        }
        await self._send_json(writer, 200, obj)
        with self._lock:
            self.completed += 1

    async def _stream(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        body: dict[str, Any],
        script: Script,
    ) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        await writer.drain()
        eof = asyncio.ensure_future(reader.read(1))  # resolves with b"" when the client hangs up
        try:
            finished = await self._stream_body(writer, body, script, eof)
        except (ConnectionError, RuntimeError):
            finished = False
        if not eof.done():
            eof.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await eof
        if not finished:
            return False
        with self._lock:
            self.completed += 1
        return True

    async def _stream_body(
        self,
        writer: asyncio.StreamWriter,
        body: dict[str, Any],
        script: Script,
        eof: asyncio.Future[bytes],
    ) -> bool:
        model = body.get("model") or "standin"
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None, usage: Any = None) -> bytes:
            obj: dict[str, Any] = {
                "id": "chatcmpl-standin",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if usage:
                obj["usage"] = usage
            text = json.dumps(obj, ensure_ascii=False)
            if script.ascii_json or any("\ud800" <= c <= "\udfff" for c in text):
                text = json.dumps(obj)  # lone surrogates can only travel as JSON escapes
            return b"data: " + text.encode() + b"\n\n"

        async def send(frame: bytes) -> bool:
            try:
                writer.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
                await writer.drain()
            except ConnectionError:  # the client left while this frame was on its way
                self._note_disconnect()
                raise
            return True

        async def pause(seconds: float | None) -> bool:
            """Sleep (None: forever) unless the client hangs up first; False if it did."""
            done, _ = await asyncio.wait({eof}, timeout=seconds)
            if done:
                self._note_disconnect()
                return False
            return True

        if script.hang:
            await pause(None)
            return False
        if not await pause(script.first_token_delay_s):
            return False
        if script.raw is not None:
            for frame in script.raw:
                await send(frame)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return True
        await send(chunk({"role": "assistant", "content": ""}, None))
        for piece in script.reasoning:
            if not await pause(script.token_delay_s):
                return False
            reasoning = {"content": script.reasoning_placeholder, script.reasoning_field: piece}
            await send(chunk(reasoning, None))
        for i, delta in enumerate(script.deltas):
            if script.drop_after is not None and i >= script.drop_after:
                transport = writer.transport
                transport.abort()
                return False
            if i and not await pause(script.token_delay_s):
                return False
            while i == 1 and script.gate is not None and not script.gate.is_set():
                if not await pause(0.01):
                    return False
            if eof.done():
                self._note_disconnect()
                return False
            await send(chunk({"content": delta}, None))
        if script.trickle is not None:
            while await pause(script.trickle_interval_s):
                await send(script.trickle)
            return False
        if script.endless_line:
            await send(b'data: {"choices": [{"index": 0, "delta": {"content": "')
            piece = b"a" * 65536
            with contextlib.suppress(ConnectionError, RuntimeError):
                while not eof.done():
                    await send(piece)
                    await asyncio.sleep(0)
            self._note_disconnect()
            return False
        if script.drop_after is not None and script.drop_after <= len(script.deltas):
            writer.transport.abort()
            return False
        await send(chunk({}, "stop"))
        options = body.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage"):
            await send(chunk({}, None, self._usage(body, script)))
        await send(b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    def _note_disconnect(self) -> None:
        with self._disconnected:
            self.client_disconnects += 1
            self._disconnected.notify_all()


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many"}
_REASONS.update({500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"})


def _err(message: str, kind: str) -> dict[str, Any]:
    return {"message": message, "type": kind, "param": None, "code": None}


def main(argv: list[str] | None = None) -> None:
    """Serve a fixed answer until interrupted (for manual runs and benchmarks)."""
    parser = argparse.ArgumentParser(description="OpenAI streaming stand-in server")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between tokens")
    parser.add_argument("--first", type=float, default=0.0, help="seconds before first token")
    parser.add_argument("--answer", default="根据资料，巡更人员需要先登录终端[C:1]。")
    parser.add_argument("--size", type=int, default=2, help="characters per delta")
    args = parser.parse_args(argv)
    script = Script.text(
        args.answer, size=args.size, token_delay_s=args.delay, first_token_delay_s=args.first
    )
    server = OpenAIStandin(script, port=args.port).start()
    print(f"OpenAI stand-in listening on {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
