"""Knowledge process per request (issue 19). Run on demand, not in the test suite::

    .venv/bin/python benchmarks/bench_kp.py [--requests 600] [--concurrency 1,16] 2>/dev/null

(stderr carries the service's access log, one line per request.)

Starts ``gcite serve`` (one process with the embedded store, the process that serves
``POST /retrieval`` in ``gcite serve --workers N``) on a copy of the law store (the
benchmark cache of :mod:`lawset`; ``GCITE_BENCH_DATA`` names another) and sends
``--requests`` External Knowledge API requests, ``--concurrency`` of them in flight, each a
corpus question with a top 5 and an ``access_roles`` condition, as a chat worker sends them.
Prints the server's CPU per request (user + system of the process, every thread) and the
wall time per request; then the same for a request that ends in 404 (unknown
``knowledge_id``: the HTTP path, authentication, parsing and the thread hop without the
search). Ten requests warm the process first (models loaded). In-process search cost:
``HybridStore.search`` on the same store (one thread, best of 7 rounds over the questions).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench_scale import law_data_dir, start_gcite
from bench_service import cpu_seconds, free_port, machine, wait_port
from lawset import DATASET, open_law_store, questions, require_corpus


def body(query: str, knowledge_id: str) -> dict[str, Any]:
    return {
        "knowledge_id": knowledge_id,
        "query": query,
        "retrieval_setting": {"top_k": 5, "score_threshold": 0.0},
        "metadata_condition": {
            "logical_operator": "and",
            "conditions": [
                {"name": "access_roles", "comparison_operator": "in", "value": ["staff"]}
            ],
        },
    }


async def measure(port: int, pid: int, n: int, levels: list[int]) -> None:
    queries = [r["question"] for r in questions()]
    url = f"http://127.0.0.1:{port}/retrieval"
    async with httpx.AsyncClient(timeout=60, headers={"authorization": "Bearer bench"}) as c:

        async def one(i: int, knowledge_id: str, status: int) -> None:
            r = await c.post(url, json=body(queries[i % len(queries)], knowledge_id))
            if r.status_code != status:
                raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")

        for i in range(10):  # warm-up: the first searches load the models (seconds)
            for attempt in range(10):
                try:
                    await one(i, DATASET, 200)
                    break
                except RuntimeError:
                    if attempt == 9:
                        raise
                    await asyncio.sleep(1.0)
        for knowledge_id, status in ((DATASET, 200), ("no-such-dataset", 404)):
            for conc in levels:
                gate = asyncio.Semaphore(conc)

                async def gated(
                    i: int, g: asyncio.Semaphore, kid: str = knowledge_id, st: int = status
                ) -> None:
                    async with g:
                        await one(i, kid, st)

                c0, t0 = cpu_seconds(pid), time.perf_counter()
                await asyncio.gather(*(gated(i, gate) for i in range(n)))
                cpu, wall = cpu_seconds(pid) - c0, time.perf_counter() - t0
                print(
                    f"HTTP {status} concurrency {conc}: server CPU {1000 * cpu / n:.2f} ms/request,"
                    f" wall {1000 * wall / n:.2f} ms/request",
                    flush=True,
                )


def in_process() -> None:
    from gcite.knowledge.embed import server_blas_threads

    server_blas_threads(1)
    store, _ = open_law_store()
    queries = [r["question"] for r in questions()]
    try:
        for q in queries[:5]:
            store.search(q, top_k=5, roles=["staff"])
        best = float("inf")
        for _ in range(7):
            c0 = time.process_time()
            for q in queries:
                store.search(q, top_k=5, roles=["staff"])
            best = min(best, (time.process_time() - c0) / len(queries))
        print(f"in-process HybridStore.search: CPU {1000 * best:.2f} ms/search", flush=True)
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--concurrency", default="1,16")
    args = parser.parse_args()
    require_corpus()
    print(machine(), "load", " ".join(Path("/proc/loadavg").read_text().split()[:3]))
    in_process()
    source = law_data_dir()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(source, data)
        port = free_port()
        proc = start_gcite(port, free_port(), data, 1)  # no model call is made
        try:
            wait_port(port, timeout=300)
            levels = [int(x) for x in args.concurrency.split(",")]
            asyncio.run(measure(port, proc.pid, args.requests, levels))
        finally:
            proc.terminate()
            proc.wait(30)
    print("load after", " ".join(Path("/proc/loadavg").read_text().split()[:3]))


if __name__ == "__main__":
    main()
