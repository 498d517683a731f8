"""The least a Python service can do per streamed answer: the floor under gcite's CPU.

A relay of no features, run as its own process by ``bench_service_cpu.py --floor``: it
accepts a Dify-style ``POST /v1/chat-messages`` (HTTP/1.1), calls the OpenAI-protocol
stand-in with the query (streaming), and writes each delta it reads as a Dify ``message``
frame, then ``message_end``. No retrieval, no database, no citations, no verification, no
pacing: one read of the model's stream and one write to the client per delta, JSON
decoded and encoded once each, on uvloop as ``gcite serve`` runs.

Its two halves each come in the plain form or on the libraries ``gcite serve`` uses, so
that a run tells what each library costs per answer on the machine:

* ``--server raw``: asyncio streams, the request read and the response written by hand;
  ``--server asgi``: a FastAPI route returning a ``StreamingResponse``, served by uvicorn
  with httptools and uvloop (as ``gcite serve``).
* ``--client raw``: asyncio streams to the stand-in, its SSE lines read by hand;
  ``--client httpx``: ``httpx.AsyncClient.stream`` and ``aiter_lines``; ``--client
  openai``: the ``openai`` SDK's streaming chat completion (as gcite's model client).

``raw``/``raw`` is what the machine charges for the event loop's wake-ups, the reads and
the writes alone: the part of the service's figure that no change of code removes on that
machine; ``asgi``/``openai`` is the libraries' relay with nothing of gcite.

Usage: ``python relay_floor.py --port N --llm-port M [--server raw|asgi]
[--client raw|httpx|openai]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator, Callable

import httpx
import openai
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

HEAD_LIMIT = 1 << 16
SEPARATORS = (",", ":")  # as the service writes its frames
END = b'data: {"event":"message_end"}\n\n'

Client = Callable[[str], AsyncIterator[str]]


def frame(text: str) -> bytes:
    """One Dify ``message`` frame."""
    body = json.dumps(
        {"event": "message", "answer": text}, ensure_ascii=False, separators=SEPARATORS
    )
    return b"data: " + body.encode() + b"\n\n"


def chat_body(query: str) -> dict[str, object]:
    """The streaming chat-completion request for ``query``."""
    return {"model": "standin", "stream": True, "messages": [{"role": "user", "content": query}]}


def delta_of(data: bytes | str) -> str | None:
    """The content of one OpenAI stream chunk's first choice (None: none, or ``[DONE]``)."""
    choices = json.loads(data).get("choices") or [{}]
    text = (choices[0].get("delta") or {}).get("content")
    return text if isinstance(text, str) else None


def raw_client(llm_port: int) -> Client:
    """A client of the stand-in on ``llm_port`` by hand: asyncio streams, one connection per
    answer (``connection: close``), its SSE lines read as they come."""

    async def deltas(query: str) -> AsyncIterator[str]:
        reader, writer = await asyncio.open_connection("127.0.0.1", llm_port)
        request = json.dumps(chat_body(query)).encode()
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"content-type: application/json\r\nconnection: close\r\n"
            + f"content-length: {len(request)}\r\n\r\n".encode()
            + request
        )
        try:
            await reader.readuntil(b"\r\n\r\n")
            while line := await reader.readline():  # chunked: size lines are skipped
                if not line.startswith(b"data: "):
                    continue
                data = line[6:].strip()
                if data == b"[DONE]":
                    return
                text = delta_of(data)
                if text:
                    yield text
        finally:
            writer.close()

    return deltas


def httpx_client(llm_port: int) -> Client:
    """A client of the stand-in on ``llm_port`` on httpx (``AsyncClient.stream``, its lines)."""
    client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{llm_port}/v1", timeout=60)

    async def deltas(query: str) -> AsyncIterator[str]:
        async with client.stream("POST", "/chat/completions", json=chat_body(query)) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                if line[6:].strip() == "[DONE]":
                    return
                text = delta_of(line[6:])
                if text:
                    yield text

    return deltas


def openai_client(llm_port: int) -> Client:
    """A client of the stand-in on ``llm_port`` on the ``openai`` SDK (streaming chat)."""
    client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{llm_port}/v1", api_key="bench")

    async def deltas(query: str) -> AsyncIterator[str]:
        stream = await client.chat.completions.create(
            model="standin", stream=True, messages=[{"role": "user", "content": query}]
        )
        async for chunk in stream:
            text = chunk.choices[0].delta.content if chunk.choices else None
            if text:
                yield text

    return deltas


CLIENTS = {"raw": raw_client, "httpx": httpx_client, "openai": openai_client}


async def raw_relay(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, deltas: Client
) -> None:
    """Answer one request on ``reader`` / ``writer`` (``connection: close``)."""
    try:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:  # a connection that only checked the port
            return
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        body = json.loads(await reader.readexactly(length)) if length else {}
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        )
        async for text in deltas(str(body.get("query", ""))):
            writer.write(frame(text))
        writer.write(END)
        await writer.drain()
    finally:
        writer.close()


def serve_raw(port: int, deltas: Client) -> None:
    """The relay on asyncio streams by hand, on uvloop (asyncio's loop without it)."""

    async def serve() -> None:
        server = await asyncio.start_server(
            lambda r, w: raw_relay(r, w, deltas), "127.0.0.1", port, limit=HEAD_LIMIT
        )
        async with server:
            await server.serve_forever()

    try:
        import uvloop

        uvloop.run(serve())
    except ImportError:  # no uvloop (Windows): asyncio's own loop, as uvicorn falls back
        asyncio.run(serve())


def serve_asgi(port: int, deltas: Client) -> None:
    """The relay as a FastAPI route on uvicorn (httptools, uvloop: as ``gcite serve``)."""
    app = FastAPI()

    @app.post("/v1/chat-messages")
    async def chat(request: Request) -> StreamingResponse:
        query = str((await request.json()).get("query", ""))

        async def frames() -> AsyncIterator[bytes]:
            async for text in deltas(query):
                yield frame(text)
            yield END

        return StreamingResponse(frames(), media_type="text/event-stream")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--llm-port", type=int, required=True)
    parser.add_argument("--server", choices=("raw", "asgi"), default="raw")
    parser.add_argument("--client", choices=tuple(CLIENTS), default="raw")
    args = parser.parse_args()
    deltas = CLIENTS[args.client](args.llm_port)
    (serve_asgi if args.server == "asgi" else serve_raw)(args.port, deltas)


if __name__ == "__main__":
    main()
