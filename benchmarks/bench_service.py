"""Chat-service benchmarks (issue 6, item 5). Run on demand, not in the test suite::

    .venv/bin/python benchmarks/bench_service.py [--streams 200] [--tokens 40]

1. Time to first text event minus the model's own first-token delay: the OpenAI stand-in
   waits ``FIRST`` seconds before its first token; we time ``POST /v1/chat-messages`` ->
   first ``message`` event and subtract ``FIRST``. Baseline, same run: the same request
   straight to the stand-in with the ``openai`` SDK (first delta minus ``FIRST``).
2. ``--streams`` concurrent streams with the stand-in at 20 ms per token: p50/p99 of the
   delay between consecutive ``message`` events seen by the clients, and the CPU used by
   the service process (user+system seconds / wall seconds, from /proc). Baseline, same
   run: the same number of concurrent streams read straight from the stand-in.

The service (``gcite serve``) and the stand-in each run in their own subprocess on
127.0.0.1; the service uses an empty knowledge base (a data dir with an empty
``catalog.json``: the knowledge branch fails fast and is reported failed), no web
source, and the OpenAI-compatible backend on the stand-in.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import openai

from gcite.knowledge.catalog import CATALOG_NAME, Catalog

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
FIRST = 0.2
ANSWER = "巡更人员需要先登录终端[C:1]，然后按路线打卡[C:2]。"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"port {port} did not open")


def start_standin(port: int, *, delay: float, first: float, tokens: int) -> subprocess.Popen[bytes]:
    answer = (ANSWER * (tokens // len(ANSWER) + 1))[:tokens]
    return subprocess.Popen(
        [
            PY,
            str(REPO / "tests" / "support" / "openai_standin.py"),
            "--port",
            str(port),
            "--delay",
            str(delay),
            "--first",
            str(first),
            "--size",
            "1",
            "--answer",
            answer,
        ],
        stdout=subprocess.DEVNULL,
    )


def start_service(port: int, llm_port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    # `gcite serve` refuses a data dir without a knowledge base (no catalog.json) unless a
    # web provider is configured: give it an empty one (no datasets, no documents).
    data_dir.mkdir(parents=True, exist_ok=True)
    Catalog(data_dir / CATALOG_NAME).save()
    env = dict(os.environ)
    env.update(
        {
            "GCITE_LLM_BASE_URL": f"http://127.0.0.1:{llm_port}/v1",
            "GCITE_LLM_MODEL": "standin",
            "GCITE_ALLOW_ANY_KEY": "true",
            "GCITE_WEB_PROVIDER": "none",
            "GCITE_PING_INTERVAL_S": "10",
        }
    )
    return subprocess.Popen(
        [str(Path(PY).parent / "gcite"), "serve", "--port", str(port), "--data-dir", str(data_dir)],
        env=env,
        stdout=subprocess.DEVNULL,
        cwd=REPO,
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


async def first_text_service(client: httpx.AsyncClient, url: str) -> float:
    start = time.perf_counter()
    payload = {"query": "巡更怎么打卡？", "user": "bench", "response_mode": "streaming"}
    async with client.stream("POST", url, json=payload) as response:
        async for line in response.aiter_lines():
            if line.startswith('data: {"event":"message"'):
                return time.perf_counter() - start
    raise RuntimeError("no text event")


async def first_text_direct(llm: openai.AsyncOpenAI) -> float:
    start = time.perf_counter()
    stream = await llm.chat.completions.create(
        model="standin", messages=[{"role": "user", "content": "巡更怎么打卡？"}], stream=True
    )
    async with stream:
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                return time.perf_counter() - start
    raise RuntimeError("no delta")


async def raw_stamps(
    port: int, path: str, payload: dict[str, Any], text_prefix: bytes
) -> list[float]:
    """POST over a plain asyncio socket; times of the SSE lines starting with ``text_prefix``.

    The same minimal reader for the service and the stand-in, so both are measured alike
    (HTTP/1.1 chunked framing lines are simply skipped). Reading stops at the last event.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(payload).encode()
    writer.write(
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"connection: close\r\ncontent-length: {len(data)}\r\n\r\n".encode()
        + data
    )
    await writer.drain()
    stamps: list[float] = []
    while True:
        line = await reader.readline()
        if not line or line.startswith(b"data: [DONE]"):
            break
        if line.startswith(text_prefix):
            stamps.append(time.perf_counter())
        elif line.startswith(b'data: {"event":"workflow_finished"'):
            break
    writer.close()
    return stamps


def gaps(stamps: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(stamps)]


SERVICE_TEXT = b'data: {"event":"message"'
STANDIN_TEXT = b'data: {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created"'


async def gaps_service(port: int) -> list[float]:
    payload = {"query": "巡更怎么打卡？", "user": "bench", "response_mode": "streaming"}
    return gaps(await raw_stamps(port, "/v1/chat-messages", payload, SERVICE_TEXT))


async def gaps_direct(port: int) -> list[float]:
    body = {"model": "standin", "stream": True, "messages": [{"role": "user", "content": "q"}]}
    stamps = await raw_stamps(port, "/v1/chat/completions", body, STANDIN_TEXT)
    return gaps(stamps[1:])  # the first chunk only carries the role


async def gaps_sdk(llm: openai.AsyncOpenAI) -> list[float]:
    stamps: list[float] = []
    stream = await llm.chat.completions.create(
        model="standin", messages=[{"role": "user", "content": "q"}], stream=True
    )
    async with stream:
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                stamps.append(time.perf_counter())
    return [b - a for a, b in itertools.pairwise(stamps)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def bench_ttft(base: str, llm_base: str, runs: int) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=60) as client:
        llm = openai.AsyncOpenAI(base_url=llm_base, api_key="x", max_retries=0)
        await first_text_service(client, base + "/v1/chat-messages")  # warm-up
        await first_text_direct(llm)
        service = [
            await first_text_service(client, base + "/v1/chat-messages") for _ in range(runs)
        ]
        direct = [await first_text_direct(llm) for _ in range(runs)]
        await llm.close()
    s, d = statistics.median(service) - FIRST, statistics.median(direct) - FIRST
    return {"service_overhead_ms": s * 1000, "direct_overhead_ms": d * 1000, "ratio": s / d}


async def bench_concurrency(
    port: int, llm_port: int, streams: int, service_pid: int, standin_pid: int
) -> dict[str, Any]:
    llm_base = f"http://127.0.0.1:{llm_port}/v1"
    await gaps_service(port)  # warm-up
    direct_start = time.perf_counter()
    direct = await asyncio.gather(*[gaps_direct(llm_port) for _ in range(streams)])
    direct_wall = time.perf_counter() - direct_start
    llm = openai.AsyncOpenAI(base_url=llm_base, api_key="x", max_retries=0)
    sdk_start = time.perf_counter()
    sdk = await asyncio.gather(*[gaps_sdk(llm) for _ in range(streams)])
    sdk_wall = time.perf_counter() - sdk_start
    await llm.close()
    cpu0, t0 = cpu_seconds(service_pid), time.perf_counter()
    llm0, own0 = cpu_seconds(standin_pid), time.process_time()
    service = await asyncio.gather(*[gaps_service(port) for _ in range(streams)])
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(service_pid) - cpu0
    llm_cpu, own_cpu = cpu_seconds(standin_pid) - llm0, time.process_time() - own0
    s_gaps = [g for one in service for g in one]
    d_gaps = [g for one in direct for g in one]
    k_gaps = [g for one in sdk for g in one]
    return {
        "streams": streams,
        "events": len(s_gaps) + len(service),
        "service_p50_ms": pct(s_gaps, 0.5) * 1000,
        "service_p99_ms": pct(s_gaps, 0.99) * 1000,
        "service_mean_ms": statistics.fmean(s_gaps) * 1000,
        "service_stream_median_s": statistics.median(sum(one) for one in service),
        "direct_p50_ms": pct(d_gaps, 0.5) * 1000,
        "direct_p99_ms": pct(d_gaps, 0.99) * 1000,
        "direct_mean_ms": statistics.fmean(d_gaps) * 1000,
        "direct_stream_median_s": statistics.median(sum(one) for one in direct),
        "sdk_p50_ms": pct(k_gaps, 0.5) * 1000,
        "sdk_p99_ms": pct(k_gaps, 0.99) * 1000,
        "sdk_wall_s": sdk_wall,
        "service_wall_s": wall,
        "direct_wall_s": direct_wall,
        "service_cpu_s": cpu,
        "service_cores": cpu / wall,
        "standin_cores": llm_cpu / wall,
        "client_cores": own_cpu / wall,
    }


def machine() -> str:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next(
            (ln.split(":", 1)[1].strip() for ln in lscpu.splitlines() if "Model name" in ln), "?"
        )
    except OSError:
        model = platform.processor() or "?"
    return f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # 1. time to first text (stand-in waits FIRST seconds, then fast tokens)
            llm_port, port = free_port(), free_port()
            procs.append(start_standin(llm_port, delay=0.0, first=FIRST, tokens=args.tokens))
            procs.append(start_service(port, llm_port, Path(tmp) / "a"))
            wait_port(llm_port)
            wait_port(port)
            base, llm_base = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{llm_port}/v1"
            ttft = asyncio.run(bench_ttft(base, llm_base, args.runs))
            for proc in procs:
                proc.terminate()
                proc.wait(10)
            procs.clear()
            # 2. concurrent streams at 20 ms per token
            llm_port, port = free_port(), free_port()
            procs.append(start_standin(llm_port, delay=0.02, first=0.0, tokens=args.tokens))
            procs.append(start_service(port, llm_port, Path(tmp) / "b"))
            wait_port(llm_port)
            wait_port(port)
            base, llm_base = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{llm_port}/v1"
            conc = asyncio.run(
                bench_concurrency(port, llm_port, args.streams, procs[1].pid, procs[0].pid)
            )
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "first_token_delay_s": FIRST,
        "ttft": ttft,
        "concurrency": conc,
    }
    print(json.dumps(report, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
