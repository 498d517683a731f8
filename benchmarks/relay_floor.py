"""The least a Python service can do per streamed answer: the floor under gcite's CPU.

A relay of no features, run as its own process by ``bench_service_cpu.py --floor``: it
accepts a Dify-style ``POST /v1/chat-messages`` (HTTP/1.1, ``connection: close``), calls
the OpenAI-protocol stand-in with the query (streaming), and writes each delta it reads as
a Dify ``message`` frame, then ``message_end``. No retrieval, no database, no citations,
no verification, no pacing: one read of the model's stream and one write to the client
per delta, JSON decoded and encoded once each, on uvloop as ``gcite serve`` runs.

Its CPU per answer, measured in the same run as the service's, is what the machine
charges for the event loop's wake-ups, the reads and the writes alone: the part of the
service's figure that no change to gcite can remove on that machine.

``--stack``: the same relay written with the libraries ``gcite serve`` is built on and
nothing of gcite: a FastAPI route returning a ``StreamingResponse`` of the ``openai``
SDK's stream, served by uvicorn with httptools and uvloop. What it adds to the plain relay
is the libraries' own cost per answer.

Usage: ``python relay_floor.py --port N --llm-port M [--stack]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator

import openai
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

HEAD_LIMIT = 1 << 16
SEPARATORS = (",", ":")  # as the service writes its frames


async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, llm_port: int) -> None:
    """Answer one request on ``reader`` / ``writer`` through the stand-in."""
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
        query = str(body.get("query", ""))
        llm_reader, llm_writer = await asyncio.open_connection("127.0.0.1", llm_port)
        request = json.dumps(
            {"model": "standin", "stream": True, "messages": [{"role": "user", "content": query}]}
        ).encode()
        llm_writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"content-type: application/json\r\nconnection: close\r\n"
            + f"content-length: {len(request)}\r\n\r\n".encode()
            + request
        )
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        )
        await llm_reader.readuntil(b"\r\n\r\n")
        while line := await llm_reader.readline():
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                break
            choices = json.loads(data).get("choices") or [{}]
            text = (choices[0].get("delta") or {}).get("content")
            if text:
                frame = json.dumps(
                    {"event": "message", "answer": text}, ensure_ascii=False, separators=SEPARATORS
                )
                writer.write(b"data: " + frame.encode() + b"\n\n")
        writer.write(b'data: {"event":"message_end"}\n\n')
        llm_writer.close()
        await writer.drain()
    finally:
        writer.close()


def serve_stack(port: int, llm_port: int) -> None:
    """The relay on FastAPI, the ``openai`` SDK and uvicorn (httptools, uvloop)."""
    app = FastAPI()
    client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{llm_port}/v1", api_key="bench")

    @app.post("/v1/chat-messages")
    async def chat(request: Request) -> StreamingResponse:
        query = str((await request.json()).get("query", ""))

        async def frames() -> AsyncIterator[bytes]:
            stream = await client.chat.completions.create(
                model="standin", stream=True, messages=[{"role": "user", "content": query}]
            )
            async for chunk in stream:
                text = chunk.choices[0].delta.content if chunk.choices else None
                if text:
                    frame = json.dumps(
                        {"event": "message", "answer": text},
                        ensure_ascii=False,
                        separators=SEPARATORS,
                    )
                    yield b"data: " + frame.encode() + b"\n\n"
            yield b'data: {"event":"message_end"}\n\n'

        return StreamingResponse(frames(), media_type="text/event-stream")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--llm-port", type=int, required=True)
    parser.add_argument("--stack", action="store_true", help="FastAPI, openai, uvicorn")
    args = parser.parse_args()
    if args.stack:
        serve_stack(args.port, args.llm_port)
        return

    async def serve() -> None:
        server = await asyncio.start_server(
            lambda r, w: relay(r, w, args.llm_port), "127.0.0.1", args.port, limit=HEAD_LIMIT
        )
        async with server:
            await server.serve_forever()

    try:
        import uvloop

        uvloop.run(serve())
    except ImportError:  # no uvloop (Windows): asyncio's own loop, as uvicorn falls back
        asyncio.run(serve())


if __name__ == "__main__":
    main()
