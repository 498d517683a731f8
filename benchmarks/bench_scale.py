"""Scale-out benchmark (issue 19, item 4). Run on demand, not in the test suite::

    .venv/bin/python benchmarks/bench_scale.py [--quick] [--tokens 40] [--out result.json]

One run, one stand-in: the OpenAI-protocol stand-in (``tests/support/openai_standin.py``, a
real loopback HTTP server in its own process) streams ``--tokens`` one-character deltas
20 ms apart. The service answers from the law corpus (``../shared/corpus``, ingested once
into the benchmark cache by :mod:`lawset`, copied into a temp data dir per service: the
embedded store allows one process), every request a different corpus question (no two
identical queries in a row; nothing is cached by the service).

For the stand-in read directly, ``gcite serve`` (1 worker: one process with the embedded
store) and ``gcite serve --workers 2`` (a knowledge process and two chat workers):

1. bursts of 1, 50, 200 and 400 concurrent streams (``--quick``: 1, 50, 200): time from the
   request to the first text event (p50, p99), p99 of the gap between consecutive text
   events, the streams dropped (no 200, no final event, or a connection error) and the
   streams whose knowledge retrieval failed (a ``node_finished`` with ``status: failed``,
   e.g. past ``kb_timeout_s``: answered, but without the knowledge base);
2. the highest sustained rate of new streams per second at which the first text still
   arrives at p50 <= 100 ms: streams are opened at a fixed rate (open loop) for
   ``--window`` seconds; the rate doubles from 4/s until the bar fails, then bisects. Each
   rate step also records the CPU per stream (ms, user + system) of the service's
   processes, the stand-in and this client; the last line printed is what all cores allow
   the 2-worker layout at the CPU per stream measured at its sustained rate.

The clients are minimal asyncio socket readers (:func:`bench_service.raw_stamps`, the same
for the service and the stand-in), in this process. Everything shares the machine's cores
(the client, the stand-in and the service): the load average is printed with the results.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_service import (
    PY,
    REPO,
    SERVICE_TEXT,
    STANDIN_TEXT,
    cpu_seconds,
    free_port,
    machine,
    pct,
    start_standin,
    wait_port,
)
from lawset import DATASET, open_law_store, questions, require_corpus

TOKEN_DELAY = 0.02
FIRST_TEXT_BAR = 0.100
NODE_FINISHED = b'data: {"event":"node_finished"'
ANSWER = "依据第二十三条[C:1]，公用消防设施的检测维修费用由业主共同承担[C:2]。"


class Stream:
    """What one client saw: status, time to first text, the text event times, the end."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.stamps: list[float] = []
        self.ended = False
        self.error = ""
        self.failed_nodes = 0  # e.g. the knowledge retrieval timed out (kb_timeout_s)

    @property
    def first_text(self) -> float | None:
        return self.stamps[0] - self.start if self.stamps else None

    def gaps(self) -> list[float]:
        return [b - a for a, b in itertools.pairwise(self.stamps)]


async def read_stream(
    port: int, path: str, payload: dict[str, Any], text: bytes, end: bytes
) -> Stream:
    """One streaming POST over a plain socket (HTTP/1.1, ``connection: close``)."""
    out = Stream()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
        data = json.dumps(payload).encode()
        writer.write(
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            "authorization: Bearer bench\r\n"
            f"connection: close\r\ncontent-length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            out.error = status.decode(errors="replace").strip() or "no response"
        while not out.error:
            line = await asyncio.wait_for(reader.readline(), 60)
            if not line:
                break
            if line.startswith(text):
                out.stamps.append(time.perf_counter())
            elif line.startswith(end):
                out.ended = True
                break
            elif line.startswith(b'data: {"event":"error"'):
                out.error = line.decode(errors="replace")[:200]
            elif line.startswith(NODE_FINISHED) and b'"status":"failed"' in line:
                out.failed_nodes += 1
        writer.close()
    except (OSError, TimeoutError) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    if not out.error and not out.ended:
        out.error = "stream ended without its final event"
    return out


class Target:
    """Where streams go: the service (``/v1/chat-messages``) or the stand-in directly."""

    def __init__(
        self, name: str, port: int, direct: bool, service: int | None = None, standin: int = 0
    ) -> None:
        self.name, self.port, self.direct = name, port, direct
        self.service, self.standin = service, standin  # pids, for CPU per stream
        self.queries = itertools.cycle([str(r["question"]) for r in questions()])
        self.users = itertools.count()

    async def one(self) -> Stream:
        query = next(self.queries)
        if self.direct:
            body = {
                "model": "standin",
                "stream": True,
                "messages": [{"role": "user", "content": query}],
            }
            stream = await read_stream(
                self.port, "/v1/chat/completions", body, STANDIN_TEXT, b"data: [DONE]"
            )
            stream.stamps = stream.stamps[1:]  # the first chunk only carries the role
            return stream
        payload = {"query": query, "user": f"u{next(self.users)}", "response_mode": "streaming"}
        return await read_stream(
            self.port, "/v1/chat-messages", payload, SERVICE_TEXT, b'data: {"event":"message_end"'
        )


def summary(streams: list[Stream]) -> dict[str, Any]:
    firsts = [s.first_text for s in streams if s.first_text is not None and not s.error]
    gaps = [g for s in streams if not s.error for g in s.gaps()]
    errors = [s.error for s in streams if s.error]
    return {
        "streams": len(streams),
        "dropped": len(errors),
        "retrieval_failed": sum(1 for s in streams if s.failed_nodes),
        "first_errors": sorted(set(errors))[:3],
        "first_text_p50_ms": round(pct(firsts, 0.5) * 1000, 1) if firsts else None,
        "first_text_p99_ms": round(pct(firsts, 0.99) * 1000, 1) if firsts else None,
        "gap_p99_ms": round(pct(gaps, 0.99) * 1000, 1) if gaps else None,
    }


async def burst(target: Target, n: int) -> dict[str, Any]:
    streams = await asyncio.gather(*(target.one() for _ in range(n)))
    return summary(list(streams))


def tree_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) of ``pid`` and its children (the workers); 0 for None."""
    if pid is None:
        return 0.0
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return cpu_seconds(pid) + sum(tree_cpu(int(k)) for k in found.stdout.split())


async def at_rate(target: Target, rate: float, window: float) -> dict[str, Any]:
    """Open ``rate`` new streams per second for ``window`` seconds (open loop). Also
    measures the CPU per stream of the service (every process), the stand-in and this
    client, in ms: everything shares the machine's cores."""
    cpu0 = (tree_cpu(target.service), cpu_seconds(target.standin), time.process_time())
    tasks: list[asyncio.Task[Stream]] = []
    start = time.perf_counter()
    for i in range(max(1, int(rate * window))):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(target.one()))
    result = summary(list(await asyncio.gather(*tasks)))
    result["rate"] = rate
    cpu1 = (tree_cpu(target.service), cpu_seconds(target.standin), time.process_time())
    streams = max(1, result["streams"])
    result["cpu_ms_per_stream"] = {
        name: round(1000 * (b - a) / streams, 1)
        for name, a, b in zip(("service", "standin", "client"), cpu0, cpu1, strict=True)
    }
    return result


async def best_rate(target: Target, window: float, steps: int) -> dict[str, Any]:
    """The highest rate (new streams/s) with first text p50 <= 100 ms, no stream dropped and
    no retrieval failed."""
    tried: list[dict[str, Any]] = []

    def ok(r: dict[str, Any]) -> bool:
        p50 = r["first_text_p50_ms"]
        clean = r["dropped"] == 0 and r["retrieval_failed"] == 0
        return clean and p50 is not None and p50 <= FIRST_TEXT_BAR * 1000

    good, bad = 0.0, None
    rate = 4.0
    while bad is None and rate <= 1024:
        r = await at_rate(target, rate, window)
        tried.append(r)
        if ok(r):
            good, rate = rate, rate * 2
        else:
            bad = rate
        await asyncio.sleep(1.5)  # let the previous streams finish
    for _ in range(steps if bad is not None else 0):
        mid = round((good + bad) / 2, 1)
        if mid in (good, bad):
            break
        r = await at_rate(target, mid, window)
        tried.append(r)
        if ok(r):
            good = mid
        else:
            bad = mid
        await asyncio.sleep(1.5)
    best = [r for r in tried if r["rate"] == good]
    return {
        "sustained_rate": good,
        "cpu_ms_per_stream": best[-1]["cpu_ms_per_stream"] if best else None,
        "tried": tried,
    }


def law_data_dir() -> Path:
    store, settings = open_law_store()
    store.close()
    return Path(settings.data_dir)


def start_gcite(port: int, llm_port: int, data_dir: Path, workers: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    env.update(
        {
            "GCITE_LLM_BASE_URL": f"http://127.0.0.1:{llm_port}/v1",
            "GCITE_LLM_MODEL": "standin",
            "GCITE_ALLOW_ANY_KEY": "true",
            "GCITE_WEB_PROVIDER": "none",
            "GCITE_DATASET": DATASET,
        }
    )
    command = [str(Path(PY).parent / "gcite"), "serve", "--port", str(port)]
    command += ["--data-dir", str(data_dir), "--workers", str(workers)]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, cwd=REPO)


async def measure(target: Target, levels: list[int], window: float, steps: int) -> dict[str, Any]:
    for _ in range(6):  # warm-up (every worker's models loaded, connections made)
        await target.one()
    out: dict[str, Any] = {"bursts": {}}
    for n in levels:
        out["bursts"][str(n)] = await burst(target, n)
        print(target.name, n, out["bursts"][str(n)], file=sys.stderr, flush=True)
        await asyncio.sleep(1.0)
    out["rate"] = await best_rate(target, window, steps)
    print(target.name, "rate", out["rate"]["sustained_rate"], file=sys.stderr, flush=True)
    return out


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1/50/200 streams, short windows")
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--window", type=float, default=None, help="seconds per rate step")
    parser.add_argument("--workers", default="1,2", help="worker counts to measure")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    require_corpus()
    levels = [1, 50, 200] if args.quick else [1, 50, 200, 400]
    window = args.window or (3.0 if args.quick else 6.0)
    steps = 2 if args.quick else 4
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "tokens": args.tokens,
        "token_delay_s": TOKEN_DELAY,
        "load_before": loadavg(),
        "results": {},
    }
    procs: list[subprocess.Popen[bytes]] = []
    try:
        llm_port = free_port()
        standin = start_standin(llm_port, delay=TOKEN_DELAY, first=0.0, tokens=args.tokens)
        procs.append(standin)
        wait_port(llm_port)
        direct = Target("direct", llm_port, direct=True, standin=standin.pid)
        report["results"]["direct"] = asyncio.run(measure(direct, levels, window, steps))
        source = law_data_dir()
        for workers in [int(w) for w in args.workers.split(",")]:
            with tempfile.TemporaryDirectory() as tmp:
                data = Path(tmp) / "data"
                shutil.copytree(source, data)
                port = free_port()
                proc = start_gcite(port, llm_port, data, workers)
                try:
                    wait_port(port, timeout=300)
                    target = Target(
                        f"{workers} worker(s)", port, False, service=proc.pid, standin=standin.pid
                    )
                    result = asyncio.run(measure(target, levels, window, steps))
                finally:
                    proc.terminate()
                    proc.wait(30)
                report["results"][f"workers_{workers}"] = result
        report["load_after"] = loadavg()
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
    text = json.dumps(report, ensure_ascii=False, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    rates = {k: v["rate"]["sustained_rate"] for k, v in report["results"].items()}
    if rates.get("workers_1") and rates.get("workers_2"):
        print(f"2 workers / 1 worker rate: {rates['workers_2'] / rates['workers_1']:.2f}x")
        # what the machine allows at all: every core busy with the 2-worker layout's CPU
        # per stream (service + stand-in + client, measured at its sustained rate)
        cpu = report["results"]["workers_2"]["rate"]["cpu_ms_per_stream"]
        if cpu and sum(cpu.values()) > 0:
            ceiling = (os.cpu_count() or 1) * 1000 / sum(cpu.values())
            print(
                f"2 workers, all cores busy: at most {ceiling:.0f} streams/s = "
                f"{ceiling / rates['workers_1']:.2f}x the 1-worker rate (CPU ms/stream {cpu})"
            )
    at_200 = {k: v["bursts"].get("200", {}) for k, v in report["results"].items()}
    print(
        "200 streams, first text p50 ms / dropped:",
        {k: (v.get("first_text_p50_ms"), v.get("dropped")) for k, v in at_200.items()},
    )


if __name__ == "__main__":
    main()
